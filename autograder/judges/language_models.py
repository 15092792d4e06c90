"""Judge for assignment 08-language-models: bigrams, embeddings and sampling (exercises/08-language-models.ipynb).

Cases, per part:
  bigram_counts            (tokens, vocab_size)              -> counts (V, V), exact
  smoothed_nll             (counts, xs, ys, alpha)           -> mean -log (N[x,y] + alpha) / (N[x].sum() + V alpha)
  embedding_backward       (W, index, g)                     -> W's gradient when out = W.index_select(0, index)
                                                                is backpropagated with upstream g (a scatter-add)
                           (X, Y, C, W, b, lr, steps)        -> a training run (TRAIN_ARGS arguments): full-batch
                                                                gradient descent on logits = concat(C[X]) @ W + b,
                                                                float64, with the learner's rule in charge of C's
                                                                gradient; the losses before each step and after
                                                                the last must match the reference run and fall
                                                                below TRAIN_TARGET
  sample_with_temperature  (logits, temperature, u)          -> one id per row, by the inverse CDF of
                                                                softmax(logits / temperature) at u

Sampling is judged by what it must do rather than by equality: row i's id k is right when u_i lies in the
k-th stretch [c_{k-1}, c_k) of the cumulative probabilities, give or take 1e-6 for rounding. A draw that
follows the wrong distribution (no temperature, the temperature multiplied, an unshifted softmax that
overflows, the largest k instead of the smallest) lands in the wrong stretch for many rows.
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

TRAIN_ARGS = 7  # a case of embedding_backward with this many arguments is a training run
TRAIN_STEPS = 40
TRAIN_TARGET = 2.75  # the loss the training run must reach (it starts at log 27 = 3.30)
SAMPLE_TOL = 1e-6


def _names() -> list[str]:
    from teenygrad.datasets import load_names  # the grader's copy of the data
    return load_names()


def _encode(words: list[str]) -> np.ndarray:
    """The stream .w1.w2. ... of ids ('.' = 0, 'a' = 1, ..., 'z' = 26)."""
    return np.array([0] + [0 if c == "." else ord(c) - 96 for c in ".".join(words) + "."], dtype=np.int64)


# --- bigram_counts --------------------------------------------------------------------------------------------

def _bigram_counts(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    counts = np.zeros((vocab_size, vocab_size))
    np.add.at(counts, (tokens[:-1], tokens[1:]), 1)
    return counts


def _bigram_cases(rng: np.random.Generator) -> list[Case]:
    names = _names()
    picked = [names[i] for i in rng.choice(len(names), size=300, replace=False)]
    return [
        (_encode(picked), 27),  # real names
        (rng.integers(0, 5, size=200), 5),
        (rng.integers(0, 3, size=2), 4),  # one pair; a symbol that never occurs
        (np.array([2], dtype=np.int64), 3),  # no pairs at all
        (np.zeros(7, dtype=np.int64), 1),  # one symbol
        (np.array([1, 1, 1, 0, 1, 1], dtype=np.int64), 2),  # repeats
    ]


# --- smoothed_nll ---------------------------------------------------------------------------------------------

def _smoothed_nll(counts: np.ndarray, xs: np.ndarray, ys: np.ndarray, alpha: float) -> np.ndarray:
    counts = np.asarray(counts, dtype=np.float64)
    P = (counts + alpha) / (counts + alpha).sum(axis=1, keepdims=True)
    return np.asarray(-np.mean(np.log(P[xs, ys])))


def _nll_cases(rng: np.random.Generator) -> list[Case]:
    names = _names()
    stream = _encode([names[i] for i in rng.choice(len(names), size=400, replace=False)])
    counts = _bigram_counts(stream[:-300], 27)
    cases = [
        (counts, stream[-300:-1], stream[-299:], 1.0),  # unseen pairs: only smoothing keeps this finite
        (counts, stream[-300:-1], stream[-299:], 0.1),
        (counts, stream[-300:-1], stream[-299:], 25.0),
    ]
    for V, n, alpha in [(5, 40, 0.5), (3, 1, 2.0), (1, 4, 1.0)]:
        cases.append((rng.integers(0, 50, size=(V, V)).astype(np.float64), rng.integers(0, V, size=n),
                      rng.integers(0, V, size=n), alpha))
    cases.append((rng.integers(1, 9, size=(4, 4)).astype(np.float64), rng.integers(0, 4, size=20),
                  rng.integers(0, 4, size=20), 0.0))  # no smoothing, every pair seen
    return cases


# --- embedding_backward ---------------------------------------------------------------------------------------

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


def _embedding_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for (num, dim), index in [((5, 3), [0, 2, 2, 4, 0, 0]), ((1, 1), [0, 0, 0]), ((6, 2), [3]),
                              ((4, 7), [1, 1, 1, 1]), ((27, 10), rng.integers(0, 27, size=200).tolist()),
                              ((8, 5), rng.permutation(8).tolist())]:
        index = np.array(index, dtype=np.int64)
        cases.append((rng.normal(size=(num, dim)), index, rng.normal(size=(len(index), dim))))
    return cases + [_training_case(rng)]


def _embedding_check(case: Case, got: tuple) -> str | None:
    if len(got) != 1:
        return f"returned {len(got)} values, expected 1"
    out = got[0].astype(np.float64) if np.issubdtype(got[0].dtype, np.number) else None
    if out is None:
        return f"dtype {got[0].dtype} is not numeric"
    if len(case) == TRAIN_ARGS:
        want = train_reference(*case)
        if out.shape != want.shape:
            return f"the training run gave {out.size} losses, expected {want.size}"
        if not np.all(np.isfinite(out)):
            return "the training run's loss became nan or inf"
        if out[-1] > TRAIN_TARGET:
            return (f"training with your rule: the loss went from {out[0]:.3f} to {out[-1]:.3f} in "
                    f"{len(out) - 1} steps, not below {TRAIN_TARGET}")
        if not np.allclose(out, want, rtol=1e-6, atol=1e-9):
            step = int(np.argmax(~np.isclose(out, want, rtol=1e-6, atol=1e-9)))
            return f"training with your rule: loss {out[step]:.6f} after {step} steps, expected {want[step]:.6f}"
        return None
    want = _scatter_add(*case)
    if out.shape != want.shape:
        return f"shape {out.shape}, expected {want.shape}"
    if not np.allclose(out, want, rtol=1e-7, atol=1e-9):
        return f"wrong gradient: largest error {np.max(np.abs(out - want)):.3g}"
    return None


# --- sample_with_temperature ------------------------------------------------------------------------------------

def cumulative(logits: np.ndarray, temperature: float) -> np.ndarray:
    """c_k = p_0 + ... + p_k for p = softmax(logits / temperature), row by row, in float64 (stable)."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)


def _sample_cases(rng: np.random.Generator) -> list[Case]:
    big = np.tile(np.array([[2.0, 1.0, 0.5, 0.0, -1.0, -3.0]]), (4000, 1))
    spread = rng.normal(size=(1, 27)) * 2
    return [
        (rng.normal(size=(50, 27)) * 2, 1.0, rng.random(50)),
        (big, 0.5, rng.random(4000)),  # one distribution, many draws: the frequencies must follow p_T
        (big, 2.0, rng.random(4000)),
        (np.tile(spread, (3000, 1)), 1.3, rng.random(3000)),
        (rng.normal(size=(20, 5)) * 300, 0.01, rng.random(20)),  # logits / T in the 10^4s: shift before exp
        (rng.normal(size=(30, 4)), 25.0, rng.random(30)),  # high temperature: nearly uniform
        (rng.normal(size=(6, 1)), 1.0, rng.random(6)),  # a single symbol: always 0
        (np.array([[0.0, 0.0, 0.0, 0.0]]), 1.0, np.array([0.5])),  # u exactly on c_1: either neighbour passes
    ]


def _sample_check(case: Case, got: tuple) -> str | None:
    logits, temperature, u = case
    if len(got) != 1:
        return f"returned {len(got)} values, expected one array of ids"
    ids = got[0]
    n, V = np.shape(logits)
    if ids.shape != (n,):
        return f"shape {ids.shape}, expected ({n},): one id per row"
    if not np.issubdtype(ids.dtype, np.number) or not np.all(ids == np.round(ids)):
        return "the ids must be whole numbers"
    ids = ids.astype(np.int64)
    if ids.min() < 0 or ids.max() >= V:
        return f"ids must lie in 0..{V - 1}, got {ids.min()}..{ids.max()}"
    c = cumulative(logits, temperature)
    lower = np.where(ids > 0, c[np.arange(n), np.maximum(ids - 1, 0)], 0.0)
    upper = np.where(ids < V - 1, c[np.arange(n), ids], np.inf)
    wrong = np.flatnonzero((u < lower - SAMPLE_TOL) | (u >= upper + SAMPLE_TOL))
    if len(wrong):
        i = wrong[0]
        right = min(int((c[i, :V - 1] <= u[i]).sum()), V - 1)
        return (f"{len(wrong)} of {n} rows (temperature {temperature}) drew the wrong id, e.g. row {i}: "
                f"u = {u[i]:.6f} lies in the stretch of id {right}, got {ids[i]}")
    return None


PARTS = {
    "bigram_counts": Part(cases=_bigram_cases, reference=_bigram_counts, rtol=0.0, atol=0.0),
    "smoothed_nll": Part(cases=_nll_cases, reference=_smoothed_nll, rtol=1e-7, atol=1e-9),
    "embedding_backward": Part(cases=_embedding_cases, check=_embedding_check),
    "sample_with_temperature": Part(cases=_sample_cases, check=_sample_check),
}
