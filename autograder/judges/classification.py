"""Judge for assignment 04-classification: a softmax classifier's machinery (exercises/04-classification.ipynb).

The learner writes four parts of teenygrad; every hidden test installs them and runs teenygrad on them, and every
reference here is numpy in float64, written from the definitions:

  softmax              softmax_rows, softmax_backward, log_softmax_backward (teenygrad/kernels/softmax.py), run
                       through Tensor.softmax / log_softmax on a strided (M, N) view of a float64 buffer drawn here
                       (transposes, steps, reversed rows; logits up to 1e300 apart; -inf entries), along both axes,
                       and their backward with a random cotangent:
                       -> (softmax(-1), log_softmax(-1), softmax(0), log_softmax(0), dx softmax, dx log_softmax)
  cross_entropy        cross_entropy and cross_entropy_backward (teenygrad/kernels/loss.py), through
                       Tensor.cross_entropy and backward of c * loss: -> (loss, dlogits), or (-1, -1) when the
                       hidden test caught the IndexError a target out of range must raise
  fit_classifier       the mini-batch loop with early stopping: the whole run is replayed here (same seed, same
                       batches, as the contract states) and the learner's W_best, per-epoch losses and best epoch
                       must be the replay's. Its hidden test puts numpy stand-ins for the softmax and cross_entropy
                       parts, so it scores on its own. Crafted runs: validation labels that disagree with training
                       (the best epoch is the first, the stop patience epochs later), patience longer than the run,
                       batches of one row, of all rows, and ones that do not divide n, and a zero step (every
                       epoch ties).
  precision_recall_f1  (y_true, y_pred, num_classes) -> (precision, recall, f1), three (num_classes,) arrays, on
                       classes that never occur or are never predicted (0/0 is 0), a single example, a single class
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

# --- softmax and log-softmax ------------------------------------------------------------------------------------

def _strided(rng: np.random.Generator, M: int, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """A float64 buffer and a strided (M, N) view of it: (buffer, shape, strides, offset), strides in elements.
    Rows and columns may step over elements, run backwards, or be a transpose (columns contiguous)."""
    step_r, step_c = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    base = np.zeros(M * step_r * N * step_c + int(rng.integers(0, 4)))
    used = base[base.size - M * step_r * N * step_c:]
    if rng.random() < 0.4:
        view = used.reshape(N * step_c, M * step_r).T  # a transpose
    else:
        view = used.reshape(M * step_r, N * step_c)
    view = view[::step_r, ::step_c]
    if rng.random() < 0.3:
        view = view[::-1]
    if rng.random() < 0.3:
        view = view[:, ::-1]
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // 8
    return base, np.array(view.shape, dtype=np.int64), np.array(view.strides, dtype=np.int64) // 8, int(offset)


def _as_view(base, shape, strides, offset) -> np.ndarray:
    return np.lib.stride_tricks.as_strided(base[int(offset):], tuple(int(n) for n in shape),
                                           tuple(int(s) * 8 for s in strides))


def _softmax_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for M, N, scale in [(1, 1, 1.0), (1, 7, 1.0), (5, 1, 3.0), (4, 6, 1.0), (3, 5, 50.0), (6, 9, 1e4),
                        (2, 3, 1e300), (7, 4, 1e30), (4, 4, 1.0), (9, 13, 5.0), (3, 3, 200.0)]:
        base, shape, strides, offset = _strided(rng, M, N)
        x = rng.normal(size=(M, N)) * scale
        if N > 1 and rng.random() < 0.5:  # -inf entries, never a whole row or column
            x[rng.random((M, N)) < 0.3] = -np.inf
            x[:, 0] = rng.normal(size=M)
            x[0, :] = rng.normal(size=N)
        view = _as_view(base, shape, strides, offset)
        view[...] = x
        cases.append((base, shape, strides, offset, rng.normal(size=(M, N))))
    base, shape, strides, offset = _strided(rng, 3, 4)  # equal logits: every probability 1/N
    _as_view(base, shape, strides, offset)[...] = 7.0
    cases.append((base, shape, strides, offset, rng.normal(size=(3, 4))))
    return cases


def _np_log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _softmax_reference(base, shape, strides, offset, g):
    x = _as_view(base, shape, strides, offset).copy()
    with np.errstate(invalid="ignore"):
        ls_last, ls_first = _np_log_softmax(x, -1), _np_log_softmax(x, 0)
        p = np.exp(ls_last)
        dx_softmax = p * (g - (g * p).sum(axis=-1, keepdims=True))
        dx_log_softmax = g - p * g.sum(axis=-1, keepdims=True)
    return p, ls_last, np.exp(ls_first), ls_first, dx_softmax, dx_log_softmax


# --- cross-entropy ------------------------------------------------------------------------------------------------

def _cross_entropy_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for shape, scale in [((1, 1), 1.0), ((1, 5), 1.0), ((6, 1), 2.0), ((8, 3), 1.0), ((5, 10), 30.0),
                         ((4, 7), 1e4), ((3, 6), 1e300), ((2, 3, 4), 1.0), ((12, 9), 3.0), ((2, 2, 2, 5), 10.0)]:
        x = rng.normal(size=shape) * scale
        t = rng.integers(0, shape[-1], size=shape[:-1])
        if shape[-1] > 2:  # -inf logits away from the targets: probability 0, a finite loss
            far = (rng.random(shape) < 0.2) & (np.arange(shape[-1]) != t[..., None])
            x[far] = -np.inf
        cases.append((x, t, float(rng.choice([1.0, -0.5, 3.0]))))
    x = rng.normal(size=(4, 3))
    cases.append((x, np.array([0, 2, 3, 1]), 1.0))  # a target out of range: IndexError, reported as -1
    cases.append((x, np.array([0, -1, 2, 1]), 1.0))  # negative targets are out of range too
    return cases


def _cross_entropy_reference(x, t, c):
    C = x.shape[-1]
    if t.min() < 0 or t.max() >= C:
        return np.asarray(-1.0), np.asarray(-1.0)
    z, tt = x.reshape(-1, C), t.reshape(-1)
    logp = _np_log_softmax(z, -1)
    R = len(tt)
    loss = -logp[np.arange(R), tt].mean()
    grad = (np.exp(logp) - np.eye(C)[tt]) * c / R
    return np.asarray(loss), grad.reshape(x.shape)


# --- the training loop ----------------------------------------------------------------------------------------

def _fit_reference(W, X, y, X_val, y_val, lr, batch_size, epochs, patience, seed):
    """The contract, replayed in numpy float64: (W_best, train losses, validation losses, best epoch)."""
    def loss(Z, y):
        return -_np_log_softmax(Z, 1)[np.arange(len(y)), y].mean()
    n, K = X.shape[0], W.shape[1]
    rng = np.random.default_rng(int(seed))
    train, val, best, best_W, best_epoch, waited = [], [], np.inf, W, 0, 0
    for epoch in range(1, int(epochs) + 1):
        order, total = rng.permutation(n), 0.0
        for start in range(0, n, int(batch_size)):
            rows = order[start:start + int(batch_size)]
            Z = X[rows] @ W
            total += loss(Z, y[rows]) * len(rows)
            W = W - lr * X[rows].T @ (np.exp(_np_log_softmax(Z, 1)) - np.eye(K)[y[rows]]) / len(rows)
        train.append(total / n)
        val.append(loss(X_val @ W, y_val))
        if val[-1] < best:
            best, best_W, best_epoch, waited = val[-1], W, epoch, 0
        else:
            waited += 1
            if waited >= patience:
                break
    return best_W, np.array(train), np.array(val), np.asarray(best_epoch)


def _fit_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, d, K, lr, batch_size, epochs, patience, flip in [
            (40, 3, 3, 0.5, 8, 12, 2, True),      # validation labels disagree: best epoch 1, stop at 1 + patience
            (37, 4, 4, 0.3, 5, 10, 3, True),      # 5 does not divide 37: a short last batch
            (30, 2, 2, 0.2, 30, 6, 10, False),    # one batch of all rows; patience longer than the run
            (12, 3, 3, 0.1, 1, 4, 2, False),      # batches of one row
            (50, 5, 3, 1.0, 64, 8, 1, False),     # batch_size > n; patience 1
            (45, 3, 5, 2.0, 7, 25, 3, False),     # a large step: the validation loss turns up on its own
            (20, 3, 3, 0.0, 6, 9, 2, False)]:     # no step at all: every epoch ties, and a tie is no improvement
        centres = rng.normal(size=(K, d)) * 2
        y, y_val = rng.integers(0, K, size=n), rng.integers(0, K, size=n // 2)
        X = centres[y] + rng.normal(size=(n, d))
        X_val = centres[y_val] + rng.normal(size=(n // 2, d))
        if flip:
            y_val = (y_val + 1) % K
        W = rng.normal(size=(d, K)) * 0.1
        cases.append((W, X, y, X_val, y_val, lr, batch_size, epochs, patience, int(rng.integers(0, 2**31))))
    return cases


def _check_fit(case: Case, got: tuple) -> str | None:
    if len(got) != 4:
        return f"reported {len(got)} values, expected 4"
    W, X, y, X_val, y_val, lr, batch_size, epochs, patience, seed = case
    want = _fit_reference(W, X, y, X_val, y_val, lr, batch_size, epochs, patience, seed)
    run = (f"n={len(y)}, K={W.shape[1]}, lr={lr}, batch_size={batch_size}, epochs={epochs}, patience={patience}")
    train, val = np.asarray(got[1], dtype=np.float64).reshape(-1), np.asarray(got[2], dtype=np.float64).reshape(-1)
    if len(val) != len(want[2]) or len(train) != len(want[1]):
        return (f"{run}: ran {len(val)} epochs (history lengths {len(train)}, {len(val)}), expected {len(want[2])}: "
                "check the batches, the order they come in, and when it stops")
    if not np.allclose(train, want[1], rtol=1e-7, atol=1e-10):
        return f"{run}: the per-epoch training losses differ (epoch 1: {train[0]:.6g}, expected {want[1][0]:.6g})"
    if not np.allclose(val, want[2], rtol=1e-7, atol=1e-10):
        return f"{run}: the per-epoch validation losses differ"
    if np.asarray(got[3]).reshape(-1).tolist() != [int(want[3])]:
        return f"{run}: best epoch {np.asarray(got[3]).reshape(-1).tolist()}, expected {int(want[3])}"
    if np.shape(got[0]) != W.shape or not np.allclose(got[0], want[0], rtol=1e-7, atol=1e-10):
        return f"{run}: the weights returned are not W after the best epoch"
    return None


# --- precision, recall, F1 ------------------------------------------------------------------------------------


def _prf(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int):
    K = int(num_classes)
    precision, recall, f1 = np.zeros(K), np.zeros(K), np.zeros(K)
    for k in range(K):
        tp = np.sum((y_true == k) & (y_pred == k))
        fp = np.sum((y_true != k) & (y_pred == k))
        fn = np.sum((y_true == k) & (y_pred != k))
        precision[k] = tp / (tp + fp) if tp + fp else 0.0
        recall[k] = tp / (tp + fn) if tp + fn else 0.0
        both = precision[k] + recall[k]
        f1[k] = 2 * precision[k] * recall[k] / both if both else 0.0
    return precision, recall, f1


def _prf_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, K in [(1, 1), (1, 3), (10, 2), (50, 4), (200, 10), (30, 6)]:
        y = rng.integers(0, K, size=n)
        pred = np.where(rng.random(n) < 0.6, y, rng.integers(0, K, size=n))  # mostly right
        cases.append((y, pred, K))
    y = rng.integers(0, 3, size=40)  # classes 3 and 4 never present; 4 also never predicted
    pred = np.where(rng.random(40) < 0.5, y, 3)
    cases.append((y, pred, 5))
    y = rng.integers(0, 3, size=25)
    cases.append((y, np.where(y == 2, 0, y), 3))  # class 2 present but never predicted: recall 0, precision 0/0
    y = rng.integers(0, 4, size=20)
    cases.append((y, y.copy(), 4))  # perfect
    cases.append((y, (y + 1) % 4, 4))  # all wrong
    return cases



PARTS = {
    "softmax": Part(cases=_softmax_cases, reference=_softmax_reference, rtol=1e-9, atol=1e-12),
    "cross_entropy": Part(cases=_cross_entropy_cases, reference=_cross_entropy_reference, rtol=1e-9, atol=1e-12),
    "fit_classifier": Part(cases=_fit_cases, check=_check_fit),
    "precision_recall_f1": Part(cases=_prf_cases, reference=_prf, rtol=1e-12, atol=1e-12),
}
