"""Judge for assignment 04-classification: logistic and softmax regression (exercises/04-classification.ipynb).

Every part is compared with a float64 numpy reference. The cases mix ordinary random inputs with the ones that
break careless code: logits of +-1000 (overflow in exp), rows whose logits are all huge and equal, a single row,
a single class. The sigmoid is judged on *relative* accuracy (atol is below every normal float64), because that is
what a stable sigmoid buys: sigma(-100) is 3.7e-44, not "about 0".
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

_EXTREMES = np.array([-1000.0, -745.0, -100.0, -30.0, -1.0, -1e-9, 0.0, 1e-9, 1.0, 30.0, 100.0, 745.0, 1000.0])


# --- references (float64, stable) ------------------------------------------------------------------------

def _sigmoid(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(-np.abs(z))  # in (0, 1]: never overflows
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _softmax(Z: np.ndarray) -> np.ndarray:
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


def _binary_cross_entropy(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.asarray(np.mean(np.logaddexp(0.0, z) - y * z))  # log(1 + e^z) - y z


def _cross_entropy_gradient(X: np.ndarray, Y: np.ndarray, W: np.ndarray) -> np.ndarray:
    return X.T @ (_softmax(X @ W) - Y) / len(X)


def _softmax_regression_step(X: np.ndarray, y: np.ndarray, W: np.ndarray, lr: float) -> np.ndarray:
    Y = np.eye(W.shape[1])[y]
    return W - lr * _cross_entropy_gradient(X, Y, W)


def _accuracy(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.asarray(np.mean(np.argmax(logits, axis=1) == y))


# --- cases -----------------------------------------------------------------------------------------------

def _sigmoid_cases(rng: np.random.Generator) -> list[Case]:
    return [
        (_EXTREMES.copy(),),
        (rng.normal(size=1) * 5,),
        (rng.normal(size=50) * 10,),
        (rng.normal(size=(4, 7)) * 40,),  # any shape, elementwise
        (rng.choice(_EXTREMES, size=(3, 5)) + rng.normal(size=(3, 5)),),
    ]


def _softmax_cases(rng: np.random.Generator) -> list[Case]:
    huge_equal = np.full((2, 4), 1000.0)
    huge_equal[1] = -1000.0
    return [
        (rng.normal(size=(1, 1)),),  # one row, one class: probability 1
        (rng.normal(size=(1, 6)),),
        (rng.normal(size=(8, 3)) * 3,),
        (rng.normal(size=(20, 10)) * 1000,),  # huge logits both ways
        (huge_equal,),  # all logits equal and huge: uniform rows
        (np.column_stack([np.full(5, 1000.0), rng.normal(size=(5, 3))]),),  # one class far ahead
    ]


def _bce_cases(rng: np.random.Generator) -> list[Case]:
    def labels(n: int) -> np.ndarray:
        return rng.integers(0, 2, size=n).astype(np.float64)

    confident = np.array([1000.0, -1000.0, 800.0, -745.0])
    return [
        (rng.normal(size=1), labels(1)),  # one example
        (rng.normal(size=10) * 3, labels(10)),
        (rng.normal(size=200) * 20, labels(200)),
        (_EXTREMES.copy(), labels(len(_EXTREMES))),
        (confident, (confident > 0).astype(np.float64)),  # confident and right: loss 0
        (confident, (confident < 0).astype(np.float64)),  # confident and wrong: loss in the hundreds
    ]


def _problem(rng: np.random.Generator, n: int, d: int, k: int, scale: float = 1.0):
    X = rng.normal(size=(n, d))
    y = rng.integers(0, k, size=n)
    W = rng.normal(size=(d, k)) * scale
    return X, y, W


# (n, d, K, weight scale): one row, one feature, one class, two classes, huge logits
_SHAPES = [(1, 1, 1, 1.0), (1, 4, 3, 1.0), (6, 1, 4, 1.0), (9, 3, 2, 1.0), (30, 6, 10, 0.5), (12, 5, 4, 500.0)]


def _gradient_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, d, k, scale in _SHAPES:
        X, y, W = _problem(rng, n, d, k, scale)
        cases.append((X, np.eye(k)[y], W))
    return cases


def _step_cases(rng: np.random.Generator) -> list[Case]:
    lrs = [0.1, 0.5, 1.0, 0.05, 0.3, 0.01]
    return [(*_problem(rng, n, d, k, scale), lr) for (n, d, k, scale), lr in zip(_SHAPES, lrs)]


def _accuracy_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, k in [(1, 1), (1, 5), (10, 3), (100, 10), (37, 2)]:
        cases.append((rng.normal(size=(n, k)), rng.integers(0, k, size=n)))
    logits = rng.normal(size=(8, 4))
    cases.append((logits, np.argmax(logits, axis=1)))  # all right
    cases.append((logits, (np.argmax(logits, axis=1) + 1) % 4))  # all wrong
    return cases


PARTS = {
    # relative accuracy: atol is below the smallest normal float64, so sigma(-100) = 3.7e-44 must be right too
    "stable_sigmoid": Part(cases=_sigmoid_cases, reference=_sigmoid, rtol=1e-7, atol=1e-300),
    "stable_softmax": Part(cases=_softmax_cases, reference=_softmax, rtol=1e-7, atol=1e-12),
    "binary_cross_entropy": Part(cases=_bce_cases, reference=_binary_cross_entropy, rtol=1e-7, atol=1e-9),
    "cross_entropy_gradient": Part(cases=_gradient_cases, reference=_cross_entropy_gradient, rtol=1e-6, atol=1e-9),
    "softmax_regression_step": Part(cases=_step_cases, reference=_softmax_regression_step, rtol=1e-6, atol=1e-9),
    "accuracy": Part(cases=_accuracy_cases, reference=_accuracy, rtol=0.0, atol=1e-12),
}
