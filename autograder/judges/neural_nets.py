"""Judge for assignment 07-neural-nets: layers and optimisers (exercises/07-neural-nets.ipynb).

The learner writes `linear_forward`, a `Linear` module (part `linear_layer`), `sgd_momentum_step` and
`adam_step`. Every part has value cases, compared with numpy in float64, and ends with one training case
`(seed, steps)`: the hidden tests train a small tanh network on three 2-D blobs (the notebook's `blobs(seed)`)
for `steps` full-batch steps with the learner's piece in charge, and report the loss of every step. The
training passes when every loss is finite and the last one is below TRAINING_LOSS (the reference
implementations end below 0.03 on every seed tested; a wrong sign, a missing term or a layer without gradients
stays far above it).

Value cases and what the hidden tests report:
  linear_forward     (x, W, b)                             -> x @ W.T + b
  linear_layer       (x, W, b)                             -> (out, dW, db) of Linear with these weights, in
                                                              float64, after out.sum().backward()
                     (in_features, out_features, seed)     -> (weight, bias) as initialised: shapes, within
                                                              +-1/sqrt(in), spread of a uniform distribution
  sgd_momentum_step  (p, g, v, lr, momentum)               -> (p - lr v', v')  with v' = momentum v + g
  adam_step          (p, g, m, v, t, lr, beta1, beta2, eps) -> (p', m', v') of one Adam step at step t
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part, _compare

TRAINING_LOSS = 0.1  # stated in the exercise: after 100 steps the loss must be below this
TRAINING_STEPS = 100
RTOL, ATOL = 1e-6, 1e-8


def _training_case(rng: np.random.Generator) -> Case:
    return int(rng.integers(0, 10**6)), TRAINING_STEPS


def _check_training(case: Case, outputs: tuple) -> str | None:
    losses = np.asarray(outputs[0], dtype=np.float64).reshape(-1)
    if losses.shape != (case[1],):
        return f"expected {case[1]} losses from the training run, got shape {losses.shape}"
    if not np.all(np.isfinite(losses)):
        return "the training loss became nan or infinite"
    if not losses[-1] < TRAINING_LOSS:
        return (f"after {case[1]} training steps the loss is {losses[-1]:.3g} (started at {losses[0]:.3g}); "
                f"it must fall below {TRAINING_LOSS}")
    return None


def _judged_by(reference):
    """A check: training cases (2 arguments) by the final loss, the others by comparison with `reference`."""
    part = Part(cases=lambda rng: [], rtol=RTOL, atol=ATOL)

    def check(case: Case, outputs: tuple) -> str | None:
        if len(case) == 2:
            return _check_training(case, outputs)
        want = reference(*case)
        return _compare(outputs, want if isinstance(want, tuple) else (want,), part)
    return check


# ---- linear_forward ---------------------------------------------------------------------------------------

_LINEAR_SHAPES = [((5, 3), 4), ((1, 1), 1), ((7, 1), 3), ((2, 6, 3), 2), ((2, 2, 3, 5), 4), ((3,), 2)]


def _linear_cases(rng: np.random.Generator) -> list[Case]:
    cases = [(rng.normal(size=xs), rng.normal(size=(n_out, xs[-1])), rng.normal(size=n_out))
             for xs, n_out in _LINEAR_SHAPES]
    return cases + [_training_case(rng)]


def _linear(x, W, b):
    return np.asarray(x) @ np.asarray(W).T + b


# ---- linear_layer -----------------------------------------------------------------------------------------------

def _layer_cases(rng: np.random.Generator) -> list[Case]:
    forward = _linear_cases(rng)[:-1]
    init = [(256, 128, int(rng.integers(0, 10**6))), (1000, 64, int(rng.integers(0, 10**6)))]
    return forward + init + [_training_case(rng)]


def _layer_forward(x, W, b):
    """out = x W^T + b; d(sum out)/dW[o, i] = sum of x[..., i] over the leading dims; d/db = their count."""
    x2 = np.asarray(x).reshape(-1, W.shape[1])
    return _linear(x, W, b), np.broadcast_to(x2.sum(0), W.shape).copy(), np.full(W.shape[0], float(len(x2)))


def _check_init(case: Case, outputs: tuple) -> str | None:
    n_in, n_out = int(case[0]), int(case[1])
    if len(outputs) != 2:
        return f"expected (weight, bias), got {len(outputs)} values"
    W, b = (np.asarray(o, dtype=np.float64) for o in outputs)
    if W.shape != (n_out, n_in) or b.shape != (n_out,):
        return f"Linear({n_in}, {n_out}): weight {W.shape} and bias {b.shape}, expected {(n_out, n_in)} and {(n_out,)}"
    bound = 1 / np.sqrt(n_in)
    if np.abs(W).max() > bound * (1 + 1e-5) or np.abs(b).max() > bound * (1 + 1e-5):
        return f"Linear({n_in}, {n_out}): initial values outside [-1/sqrt(in), 1/sqrt(in)] = +-{bound:.4g}"
    # a uniform(-a, a) has standard deviation a / sqrt(3); with >= 8000 draws the sample std is within 2%
    if abs(W.std() / (bound / np.sqrt(3)) - 1) > 0.03 or abs(W.mean()) > 0.05 * bound:
        return (f"Linear({n_in}, {n_out}): the weights' mean {W.mean():.3g} and std {W.std():.3g} are not those of "
                f"uniform(-1/sqrt(in), 1/sqrt(in)) (mean 0, std {bound / np.sqrt(3):.3g})")
    if np.ptp(b) == 0:
        return f"Linear({n_in}, {n_out}): every bias is the same; draw them from the same uniform distribution"
    return None


_check_layer_forward = _judged_by(_layer_forward)


def _check_layer(case: Case, outputs: tuple) -> str | None:
    if len(case) == 3 and np.ndim(case[0]) == 0:
        return _check_init(case, outputs)
    return _check_layer_forward(case, outputs)


# ---- sgd_momentum_step ---------------------------------------------------------------------------------------------

def _sgd_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for shape, lr, momentum in [((4,), 0.1, 0.9), ((3, 5), 0.01, 0.5), ((1,), 1.0, 0.0), ((2, 3, 2), 0.3, 0.99)]:
        cases.append((rng.normal(size=shape), rng.normal(size=shape), rng.normal(size=shape), lr, momentum))
    return cases + [_training_case(rng)]


def _sgd(p, g, v, lr, momentum):
    v = momentum * v + g
    return p - lr * v, v


# ---- adam_step ---------------------------------------------------------------------------------------------

def _adam_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for shape, t, lr, b1, b2, eps in [((4,), 1, 0.01, 0.9, 0.999, 1e-8), ((3, 5), 2, 0.001, 0.9, 0.999, 1e-8),
                                      ((6,), 10, 0.1, 0.8, 0.99, 1e-6), ((2, 3, 2), 1000, 0.003, 0.9, 0.95, 1e-8),
                                      ((1,), 3, 0.5, 0.0, 0.9, 1e-3)]:
        g = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 3, size=shape)  # gradients of very different sizes
        m, v = (rng.normal(size=shape), rng.random(shape) ** 2) if t > 1 else (np.zeros(shape), np.zeros(shape))
        cases.append((rng.normal(size=shape), g, m, v, t, lr, b1, b2, eps))
    return cases + [_training_case(rng)]


def _adam(p, g, m, v, t, lr, b1, b2, eps):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps), m, v


PARTS = {
    "linear_forward": Part(cases=_linear_cases, check=_judged_by(_linear), reference=_linear),
    "linear_layer": Part(cases=_layer_cases, check=_check_layer, reference=_layer_forward),
    "sgd_momentum_step": Part(cases=_sgd_cases, check=_judged_by(_sgd), reference=_sgd),
    "adam_step": Part(cases=_adam_cases, check=_judged_by(_adam), reference=_adam),
}
