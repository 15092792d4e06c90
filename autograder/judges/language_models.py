"""Judge for assignment 08-language-models: the embedding's gradient, top-k and nucleus sampling
(exercises/08-language-models.ipynb).

The learner writes three pieces of teenygrad: `ops.movement.index_add` (the backward of index_select),
`text.top_k_logits` and `text.top_p_logits` (which `text.draw` applies). The hidden tests install them and run
teenygrad on the cases below; this judge checks the outputs in numpy float64.

  index_add     (W, axis, index, g)         -> W's gradient when out = W.index_select(axis, index) is
                                               backpropagated with upstream g (a scatter-add along axis)
                (g, shape, index)           -> (index_add(g, shape, 0, index) in float32, its dtype is float32)
                (X, Y, C, W, b, lr, steps)  -> a training run (TRAIN_ARGS arguments): full-batch gradient descent
                                               on logits = concat(C[X]) @ W + b, float64, the learner's piece in
                                               charge of C's gradient; the losses must match the reference run
                                               and fall below TRAIN_TARGET
  top_k_logits  (logits, k, u)              -> (the filtered logits, text.draw(logits, u, 1, top_k=k))
  top_p_logits  (logits, top_p, u)          -> (the filtered logits, text.draw(logits, u, 1, top_p=top_p))
                with k < 1 or top_p outside (0, 1]: 1 if ValueError was raised

Draws are judged by what they must do: row i's id k is right when it was kept and u_i lies in the k-th stretch
[c_{k-1}, c_k) of the cumulative filtered probabilities, give or take SAMPLE_TOL (draw runs in float32). The
nucleus cases keep every id's probability mass "above" away from top_p, so float32 rounding cannot flip an id.
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part, compare

TRAIN_ARGS = 7  # a case of index_add with this many arguments is a training run
TRAIN_STEPS = 40
TRAIN_TARGET = 2.75  # the loss the training run must reach (it starts at log 27 = 3.30)
SAMPLE_TOL = 2e-5
EXACT = Part(cases=lambda rng: [], rtol=1e-10, atol=1e-12)


def _names() -> list[str]:
    from teenygrad.datasets import load_names  # the grader's copy of the data
    return load_names()


# ---- index_add ----------------------------------------------------------------------------------------------

def _scatter_add(W: np.ndarray, index: np.ndarray, g: np.ndarray) -> np.ndarray:
    out = np.zeros(np.shape(W))
    np.add.at(out, np.asarray(index, dtype=np.int64), g)
    return out


def train_reference(X, Y, C, W, b, lr, steps) -> np.ndarray:
    """The training run in numpy float64 with hand-written gradients: the losses before each step and after the
    last. logits = E @ W + b with E the rows C[X] of each example side by side."""
    X, Y = np.asarray(X, dtype=np.int64), np.asarray(Y, dtype=np.int64)
    C, W, b = (np.array(a, dtype=np.float64) for a in (C, W, b))
    n, block = X.shape
    dim = C.shape[1]
    losses = []
    for step in range(int(steps) + 1):
        E = C[X].reshape(n, block * dim)
        Z = E @ W + b
        Z = Z - Z.max(axis=1, keepdims=True)
        logp = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))
        losses.append(-logp[np.arange(n), Y].mean())
        if step == steps:
            break
        dZ = np.exp(logp)
        dZ[np.arange(n), Y] -= 1
        dZ /= n
        dE = (dZ @ W.T).reshape(n * block, dim)
        dC = _scatter_add(C, X.reshape(-1), dE)
        C, W, b = C - lr * dC, W - lr * E.T @ dZ, b - lr * dZ.sum(axis=0)
    return np.array(losses)


def _training_case(rng: np.random.Generator) -> Case:
    names = _names()
    picked = [names[i] for i in rng.choice(len(names), size=250, replace=False)]
    block, dim = 2, 4
    xs, ys = [], []
    for w in picked:
        ids = [0] * block + [ord(c) - 96 for c in w] + [0]
        for t in range(block, len(ids)):
            xs.append(ids[t - block:t])
            ys.append(ids[t])
    C = rng.normal(size=(27, dim))
    W = rng.normal(size=(block * dim, 27)) * 0.01
    return np.array(xs, dtype=np.int64), np.array(ys, dtype=np.int64), C, W, np.zeros(27), 2.0, TRAIN_STEPS


def _index_add_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for shape, axis, index in [((5, 3), 0, [0, 2, 2, 4, 0, 0]), ((1, 1), 0, [0, 0, 0]), ((6, 2), 0, [3]),
                               ((4, 7), 0, [-1, 3, -4, 0]), ((27, 10), 0, rng.integers(0, 27, size=200)),
                               ((2, 5, 3), 1, [[4, 4], [0, -5]]), ((3, 4, 6), 2, [5, 5, 5, 1, 0]),
                               ((8, 5), 0, rng.permutation(8)), ((2000, 16), 0, rng.integers(-2000, 2000, size=3000)),
                               ((4, 3), 1, np.zeros(0, dtype=np.int64))]:
        index = np.array(index, dtype=np.int64)
        g_shape = shape[:axis] + index.shape + shape[axis + 1:]
        cases.append((rng.normal(size=shape), axis, index, rng.normal(size=g_shape)))
    cases.append((rng.normal(size=(5, 3)), np.array([4, 3]), np.array([1, -1, 1, 2, 1])))  # float32, direct
    return cases + [_training_case(rng)]


def _index_add_reference(W, axis, index, g) -> np.ndarray:
    out = np.zeros(np.shape(W))
    ids = np.asarray(index, dtype=np.int64).reshape(-1) % out.shape[axis]
    g = np.asarray(g, dtype=np.float64).reshape(out.shape[:axis] + (len(ids),) + out.shape[axis + 1:])
    np.add.at(out, (slice(None),) * axis + (ids,), g)
    return out


def _check_index_add(case: Case, got: tuple) -> str | None:
    if len(case) == TRAIN_ARGS:
        out, want = np.asarray(got[0], np.float64).reshape(-1), train_reference(*case)
        if out.shape != want.shape:
            return f"the training run gave {out.size} losses, expected {want.size}"
        if not np.all(np.isfinite(out)):
            return "the training loss became nan or infinite"
        if out[-1] > TRAIN_TARGET:
            return (f"training with your index_add: the loss went from {out[0]:.3f} to {out[-1]:.3f} in "
                    f"{len(out) - 1} steps, not below {TRAIN_TARGET}")
        if not np.allclose(out, want, rtol=1e-6, atol=1e-9):
            step = int(np.argmax(~np.isclose(out, want, rtol=1e-6, atol=1e-9)))
            return f"training with your index_add: loss {out[step]:.6f} after {step} steps, expected {want[step]:.6f}"
        return None
    if len(case) == 3:
        g, shape, index = case
        want = _index_add_reference(np.zeros(tuple(shape)), 0, index, g)
        if len(got) != 2 or int(np.asarray(got[1]).reshape(-1)[0]) != 1:
            return "index_add of a float32 gradient must return a float32 Tensor"
        why = compare(got[:1], (want,), Part(cases=lambda rng: [], rtol=1e-5, atol=1e-6))
        return why and f"float32, shape {tuple(shape)}: {why}"
    W, axis, index, g = case
    why = compare(got, (_index_add_reference(W, axis, index, g),), EXACT)
    return why and f"input of shape {np.shape(W)}, axis {axis}, index of shape {np.shape(index)}: {why}"


# ---- top_k_logits and top_p_logits -----------------------------------------------------------------------------

def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _top_k(z: np.ndarray, k: int) -> np.ndarray:
    larger = (z[:, None, :] > z[:, :, None]).sum(axis=2)
    return np.where(larger < k, z, -np.inf)


def _mass_above(z: np.ndarray) -> np.ndarray:
    return ((z[:, None, :] > z[:, :, None]) * _softmax(z)[:, None, :]).sum(axis=2)


def _top_p(z: np.ndarray, top_p: float) -> np.ndarray:
    return np.where(_mass_above(z) < top_p, z, -np.inf)


def _check_draws(filtered: np.ndarray, u: np.ndarray, ids: np.ndarray) -> str | None:
    ids = np.asarray(ids).reshape(-1)
    if ids.shape != u.shape or not np.issubdtype(ids.dtype, np.integer):
        return f"draw returned {ids.shape} {ids.dtype}, expected {u.shape} integer ids"
    p = _softmax(filtered)
    if ids.min(initial=0) < 0 or ids.max(initial=0) >= p.shape[1]:
        return "draw returned an id outside the vocabulary"
    rows = np.arange(len(ids))
    if np.any(p[rows, ids] == 0):
        i = int(np.argmax(p[rows, ids] == 0))
        return f"draw row {i}: id {ids[i]} was filtered out, yet drawn"
    c = np.cumsum(p, axis=1)
    hi, lo = c[rows, ids], np.where(ids > 0, c[rows, np.maximum(ids - 1, 0)], 0.0)
    bad = (u < lo - SAMPLE_TOL) | (u >= hi + SAMPLE_TOL)
    if bad.any():
        i = int(np.argmax(bad))
        return f"draw row {i}: u = {u[i]:.6f} lies outside id {ids[i]}'s stretch [{lo[i]:.6f}, {hi[i]:.6f})"
    return None


def _check_filter(name: str, reference, case: Case, got: tuple) -> str | None:
    logits, arg, u = case
    if len(got) == 1:
        raised = got[0].size == 1 and int(got[0].reshape(-1)[0]) == 1
        return None if raised else f"{name} with {arg!r} must raise ValueError"
    if len(got) != 2:
        return f"expected the filtered logits and the draws, got {len(got)} outputs"
    want = reference(np.asarray(logits, np.float64), arg)
    kept = np.isfinite(np.asarray(got[0], np.float64))
    if kept.shape == want.shape and not np.array_equal(kept, np.isfinite(want)):
        i = int(np.argmax((kept != np.isfinite(want)).any(axis=1)))
        return (f"{name}(logits of shape {np.shape(logits)}, {arg!r}), row {i}: kept ids "
                f"{np.flatnonzero(kept[i]).tolist()}, expected {np.flatnonzero(np.isfinite(want[i])).tolist()}")
    why = compare(got[:1], (want,), Part(cases=lambda rng: [], rtol=1e-9, atol=1e-12))
    if why:
        return f"{name}(logits of shape {np.shape(logits)}, {arg!r}): {why}"
    return _check_draws(want, np.asarray(u, np.float64), got[1])


def _top_k_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, V, k, scale in [(6, 27, 5, 2.0), (4, 10, 1, 1.0), (3, 8, 8, 1.0), (3, 8, 20, 1.0), (200, 27, 3, 3.0)]:
        logits = rng.normal(size=(n, V)) * scale
        cases.append((logits, k, rng.random(n)))
    ties = rng.integers(-2, 3, size=(8, 12)).astype(np.float64)  # many ties
    cases.append((ties, 4, rng.random(8)))
    cases.append((np.repeat([[3.0, 1.0, 2.0, 0.5, -1.0]], 4000, axis=0), 2, rng.random(4000)))
    cases.append((rng.normal(size=(2, 5)), 0, rng.random(2)))
    return cases


def _nucleus_logits(rng: np.random.Generator, n: int, V: int, scale: float, top_p: float) -> np.ndarray:
    """n rows of random logits whose every id's probability above stays 1e-3 away from top_p."""
    rows = []
    while len(rows) < n:
        z = rng.normal(size=(1, V)) * scale
        if np.all(np.abs(_mass_above(z) - top_p) > 1e-3):
            rows.append(z[0])
    return np.array(rows)


def _top_p_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, V, top_p, scale in [(6, 27, 0.9, 2.0), (5, 10, 0.5, 1.0), (4, 8, 0.999, 1.0), (4, 8, 1.0, 1.0),
                               (4, 6, 0.05, 3.0), (200, 27, 0.8, 2.0)]:
        cases.append((_nucleus_logits(rng, n, V, scale, top_p), top_p, rng.random(n)))
    ties = np.array([[1.0, 1.0, 1.0, 0.0, -3.0], [2.0, 0.0, 0.0, 0.0, 0.0]])  # ties across the threshold
    cases.append((ties, 0.5, rng.random(2)))
    cases.append((np.array([[2.0, 1.0, -np.inf, -np.inf, 0.0]] * 3), 0.95, rng.random(3)))  # after top-k
    cases.append((np.repeat(np.log([[0.5, 0.3, 0.15, 0.05]]), 4000, axis=0), 0.75, rng.random(4000)))
    cases.append((rng.normal(size=(2, 5)), 0.0, rng.random(2)))
    cases.append((rng.normal(size=(2, 5)), 1.5, rng.random(2)))
    return cases


PARTS = {
    "index_add": Part(cases=_index_add_cases, check=_check_index_add),
    "top_k_logits": Part(cases=_top_k_cases, check=lambda case, got: _check_filter("top_k_logits", _top_k, case, got)),
    "top_p_logits": Part(cases=_top_p_cases, check=lambda case, got: _check_filter("top_p_logits", _top_p, case, got)),
}
