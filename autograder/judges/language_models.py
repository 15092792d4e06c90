"""Judge for assignment 08-language-models: the machinery of chapter 8's language models
(exercises/08-language-models.ipynb).

The learner writes eleven parts of teenygrad: `text.Vocab`'s build, encode and decode (vocab), `text.split`,
`text.windows`, the bigram model's `bigram_counts`, `smoothed` and `bigram_nll` (bigram), `text.draw`,
`text.sample`, `ops.movement.index_add` (the backward of index_select), `text.MLPLanguageModel`'s __init__ and
forward (mlp), `text.evaluate`, `text.top_k_logits` and `text.top_p_logits`. The hidden tests install them and run
teenygrad on the cases below (with the grader's own stand-ins for any other part's piece a part runs: `draw`'s
filters, the filters' `draw`, `windows`' encode, `sample`'s draw and decode); this judge checks the outputs in numpy
float64. "1 if ValueError" below means: the output is 1 when the call raised ValueError.

  vocab         (texts, boundary ("default": build's default; "": None), probe, ids, unknown)
                                            -> (itos, built as the class it was called on, encode(probe), an int64
                                                array, decode(ids) of an array, a list and a Tensor, 1 if
                                                encode(unknown) raised KeyError)
  split         (items, fractions (empty: the defaults, seed too), seed)
                                            -> (0, the parts' lengths, the parts side by side, a tuple of lists)
                                               or 1 if ValueError (fractions that do not add up to 1, or negative)
  windows       (symbols, words, block_size) -> (0, X, Y, both int64 arrays) or 1 if ValueError (block_size < 1)
  bigram        ("counts", first, second, num, as Tensors) -> (N, a float32 Tensor)
                ("smoothed", counts, alpha, dtype bits)    -> (P, a float32 Tensor, a new one with counts unchanged)
                                                              or 1 if ValueError
                ("nll", probs, first, second, as Tensors)  -> (the mean NLL, a Python float)
  draw          (logits, u, temperature, top_k (0: None), top_p (0: None), dtype bits, u as a Tensor)
                                            -> (0, ids, an int64 Tensor) or 1 if ValueError (temperature <= 0)
  sample        (symbols, A, B, n, block_size, temperature, seed, max_len), the model's logits for a context c
                being A[c[:, -1]] + B[c[:, 0]]
                                            -> (0, the words, how many times the model was called, a list of str,
                                                every context an (n, block_size) int64 Tensor and the first all
                                                boundaries) or 1 if ValueError (no boundary at id 0)
  index_add     (W, axis, index, g)         -> W's gradient when out = W.index_select(axis, index) is
                                               backpropagated with upstream g (a scatter-add along axis)
                (g, shape, index)           -> (index_add(g, shape, 0, index) in float32, its dtype is float32)
                (X, Y, C, W, b, lr, steps)  -> a training run (TRAIN_ARGS arguments): full-batch gradient descent
                                               on logits = concat(C[X]) @ W + b, float64, the learner's piece in
                                               charge of C's gradient; the losses must match the reference run
                                               and fall below TRAIN_TARGET
  mlp           (vocab_size, emb_dim, hidden, block_size, seed, X, Y, X as a Tensor)
                                            -> (parameter names, the five parameters after tg.manual_seed(seed),
                                                the logits of X, the five gradients of the mean cross-entropy)
  evaluate      (X, Y, T1, T2, batch_size (-1: None), X and Y as Tensors), the model's logits for rows x being
                T1[x[:, 0]] + T2[x[:, -1]] (float64)
                                            -> (0, the mean, a Python float, the rows of each call, the rows the
                                                model saw in order) or 1 if ValueError
  top_k_logits  (logits, k, u)              -> (the filtered logits, text.draw(logits, u, 1, top_k=k))
  top_p_logits  (logits, top_p, u)          -> (the filtered logits, text.draw(logits, u, 1, top_p=top_p))
                with k < 1 or top_p outside (0, 1]: 1 if ValueError was raised

Draws are judged by what they must do: row i's id k is right when it was kept and u_i lies in the k-th stretch
[c_{k-1}, c_k) of the cumulative filtered probabilities, give or take SAMPLE_TOL (teenygrad's draw runs in float32).
The nucleus cases keep every id's probability mass "above" away from top_p, so float32 rounding cannot flip an id.
`sample` runs on the grader's draw (float64, `inverse_cdf` below), so its words are judged exactly.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judges import Case, Part, compare

TRAIN_ARGS = 7  # a case of index_add with this many arguments is a training run
TRAIN_STEPS = 40
TRAIN_TARGET = 2.75  # the loss the training run must reach (it starts at log 27 = 3.30)
SAMPLE_TOL = 2e-5
EXACT = Part(cases=lambda rng: [], rtol=1e-10, atol=1e-12)
LETTERS = ".abcdefghijklmnopqrstuvwxyz"


def _names() -> list[str]:
    from teenygrad.datasets import load_names  # the grader's copy of the data
    return load_names()


def _one(outputs: tuple, k: int) -> int:
    """Output k as an int (a flag or a code); -1 when it is not one number."""
    a = np.asarray(outputs[k]).reshape(-1)
    return int(a[0]) if a.size == 1 and np.issubdtype(a.dtype, np.number) else -1


def _raised(outputs: tuple) -> bool:
    return len(outputs) == 1 and _one(outputs, 0) == 1


def _strings(a) -> list[str]:
    return [str(x) for x in np.asarray(a).reshape(-1)]


def _short(items, n: int = 4) -> str:
    items = list(items)
    return repr(items[:n])[:-1] + (", ...]" if len(items) > n else "]")


# ---- vocab ------------------------------------------------------------------------------------------------------

def vocab_symbols(texts, boundary: str) -> list[str]:
    """What Vocab.build(texts, boundary) lists: the boundary (if any) first, then the other characters, sorted."""
    b = "." if boundary == "default" else (boundary or None)
    chars = sorted(set("".join(str(t) for t in np.atleast_1d(texts))) - {b})
    return ([b] if b is not None else []) + chars


def _vocab_cases(rng: np.random.Generator) -> list[Case]:
    names = _names()
    picked = [names[i] for i in rng.choice(len(names), size=60, replace=False)]
    cases = []
    for texts, boundary, probe, unknown in [
            (picked, "default", picked[0] + picked[1], "Anna"),
            (["Hello, World!", "teeny grad 42", "tab\there"], ".", "Hold 42!", "hello?"),
            (["a.b", "c..a", "b"], ".", "a.c.", "d"),           # the boundary in the texts: still id 0, once
            (["hello world"], "", "hello", "hello."),             # no boundary: "." is not a symbol
            (["to be, or not\nto be", "that is the question"], "\n", "be\nor\n", "Be"),
            (["zyx", "éa", "ab#"], "#", "", "q"),                  # encode("") is an empty int64 array
            (["x"], "default", "x.x", "y")]:
        symbols = vocab_symbols(texts, boundary)
        ids = rng.integers(0, len(symbols), size=int(rng.integers(0, 15)))
        cases.append((np.array(texts), boundary, probe, ids.astype(np.int64), unknown))
    return cases


def _check_vocab(case: Case, outputs: tuple) -> str | None:
    texts, boundary, probe, ids, unknown = case
    want = vocab_symbols(texts, boundary)
    shown = {"default": "", "": ", boundary=None"}.get(boundary, f", boundary={boundary!r}")
    call = f"Vocab.build({_short(_strings(texts), 3)}{shown})"
    if len(outputs) != 6:
        return f"expected 6 outputs (itos, class, encoded, its type, decoded, KeyError), got {len(outputs)}"
    itos = _strings(outputs[0])
    if itos != want:
        return f"{call}.itos is {itos!r}, expected {want!r}"
    if _one(outputs, 1) != 1:
        return f"{call} called on a subclass of Vocab must return an instance of that class (cls(symbols))"
    if _one(outputs, 3) != 1:
        return f"encode({probe!r}) must return a numpy array of dtype int64 (also for an empty string)"
    encoded = np.asarray(outputs[2]).reshape(-1).tolist()
    if encoded != [want.index(c) for c in probe]:
        return f"{call}.encode({probe!r}) gives {encoded}, expected {[want.index(c) for c in probe]}"
    decoded, expected = _strings(outputs[4]), "".join(want[int(i)] for i in np.asarray(ids).reshape(-1))
    if decoded != [expected] * 3:
        return (f"{call}.decode({np.asarray(ids).tolist()}) gives {decoded!r} from a numpy array, a list and a "
                f"Tensor; expected {expected!r} from each")
    if _one(outputs, 5) != 1:
        return f"{call}.encode({unknown!r}) must raise KeyError (a symbol not in the vocabulary)"
    return None


# ---- split ------------------------------------------------------------------------------------------------------

DEFAULT_FRACTIONS = (0.8, 0.1, 0.1)


def split_reference(items, fractions, seed) -> list[list]:
    """The parts text.split gives (the defaults when `fractions` is empty); items as a list."""
    items = np.asarray(items).reshape(-1).tolist()
    fractions, seed = (DEFAULT_FRACTIONS, 0) if np.size(fractions) == 0 else (np.atleast_1d(fractions).tolist(), seed)
    order = np.random.default_rng(int(seed)).permutation(len(items))
    ends = [int(round(len(items) * c)) for c in np.cumsum(fractions)]
    return [[items[i] for i in order[a:b]] for a, b in zip([0] + ends[:-1], ends)]


def _near_half(n: int, fractions) -> bool:
    """Does some part's end n * (f_0 + ... + f_k) lie within 1e-6 of a half (where rounding rules differ)?"""
    return any(abs(n * c - math.floor(n * c) - 0.5) < 1e-6 for c in np.cumsum(fractions))


def _split_cases(rng: np.random.Generator) -> list[Case]:
    names = _names()
    cases: list[Case] = [(np.arange(1000) * 3 + 1, np.zeros(0), 0)]  # the defaults: (0.8, 0.1, 0.1), seed 0
    for n, k in [(200, 3), (int(rng.integers(20, 300)), 2), (int(rng.integers(20, 300)), 4), (7, 3), (1, 2), (0, 3)]:
        while True:
            fractions = rng.dirichlet(np.ones(k))
            if not _near_half(n, fractions):
                break
        items = np.array(rng.choice(names, size=n, replace=False)) if n == 200 else rng.permutation(n) * 10
        cases.append((items, fractions, int(rng.integers(0, 10**6))))
    cases.append((np.arange(33), np.array([0.6, 0.0, 0.4]), int(rng.integers(0, 10**6))))  # an empty part
    cases += [(np.arange(10), np.array([0.5, 0.4]), 1), (np.arange(10), np.array([1.2, -0.2]), 1)]
    return cases


def _check_split(case: Case, outputs: tuple) -> str | None:
    items, fractions, seed = case
    bad = np.size(fractions) and (abs(np.sum(fractions) - 1) > 1e-9 or np.min(fractions) < 0)
    call = (f"split({np.size(items)} items" + (f", {np.round(fractions, 4).tolist()}, seed={seed})"
                                                if np.size(fractions) else ") with the default fractions and seed"))
    if bad:
        return None if _raised(outputs) else f"{call} must raise ValueError"
    if len(outputs) != 4 or _one(outputs, 0) != 0:
        return f"{call} raised ValueError" if _raised(outputs) else f"expected 4 outputs, got {len(outputs)}"
    want = split_reference(items, fractions, seed)
    if _one(outputs, 3) != 1:
        return f"{call} must return a tuple of lists"
    lengths = np.asarray(outputs[1]).reshape(-1).tolist()
    if lengths != [len(p) for p in want]:
        return f"{call}: parts of {lengths} items, expected {[len(p) for p in want]}"
    flat = [x for p in want for x in p]
    got = np.asarray(outputs[2]).reshape(-1).tolist()
    same = (_strings(got) == [str(x) for x in flat]) if flat and isinstance(flat[0], str) else got == flat
    if len(got) != len(flat) or not same:
        return f"{call}: the parts hold the wrong items (shuffle with np.random.default_rng(seed).permutation(n))"
    return None


# ---- windows ----------------------------------------------------------------------------------------------------

def windows_reference(symbols: str, words, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    stoi = {s: i for i, s in enumerate(symbols)}
    xs, ys = [], []
    for w in _strings(words):
        context = [0] * block_size
        for ch in list(w) + [symbols[0]]:
            xs.append(context)
            ys.append(stoi[ch])
            context = context[1:] + [stoi[ch]]
    return np.array(xs, dtype=np.int64).reshape(len(ys), block_size), np.array(ys, dtype=np.int64)


def _windows_cases(rng: np.random.Generator) -> list[Case]:
    names = _names()
    cases = [(LETTERS, np.array([names[i] for i in rng.choice(len(names), size=50)]), 1),
             (LETTERS, np.array([names[i] for i in rng.choice(len(names), size=50)]), 3)]
    for block in (2, 5):
        words = ["".join(rng.choice(list("abcxyz"), size=int(rng.integers(0, 7)))) for _ in range(12)]
        cases.append((".abcxyz", np.array(words), block))
    cases += [(".ab", np.array(["ab", "", "b"]), 4), (".xyz", np.array(["zzz"]), 8),
              (LETTERS, np.array([], dtype=str), 2), (LETTERS, np.array(["emma"]), 0)]
    return cases


def _check_windows(case: Case, outputs: tuple) -> str | None:
    symbols, words, block = case
    call = f"windows({_short(_strings(words))}, vocab, {block})"
    if block < 1:
        return None if _raised(outputs) else f"{call} must raise ValueError"
    if len(outputs) != 4 or _one(outputs, 0) != 0:
        return f"{call} raised ValueError" if _raised(outputs) else f"expected 4 outputs, got {len(outputs)}"
    if _one(outputs, 3) != 1:
        return f"{call} must return two numpy arrays of dtype int64"
    X, Y = windows_reference(symbols, words, int(block))
    got_x, got_y = np.asarray(outputs[1]), np.asarray(outputs[2])
    if got_x.shape != X.shape or got_y.shape != Y.shape:
        return f"{call}: X {got_x.shape} and Y {got_y.shape}, expected {X.shape} and {Y.shape}"
    if not np.array_equal(got_x, X) or not np.array_equal(got_y, Y):
        i = int(np.argmax((got_x != X).any(axis=1) | (got_y != Y))) if len(Y) else 0
        return (f"{call}: pair {i} is {got_x[i].tolist()} -> {got_y[i]}, expected {X[i].tolist()} -> {Y[i]} "
                f"(each word read as {block} boundaries, the word, one boundary)")
    return None


# ---- bigram: bigram_counts, smoothed, bigram_nll ------------------------------------------------------------------

def _bigram_cases(rng: np.random.Generator) -> list[Case]:
    cases: list[Case] = []
    for num, n, as_tensor in [(27, 3000, 0), (5, 200, 1), (1, 5, 0), (9, 0, 1), (27, 5000, 1)]:
        first, second = rng.integers(0, num, size=n), rng.integers(0, num, size=n)
        cases.append(("counts", first, second, num, as_tensor))
    counts = rng.integers(0, 6, size=(27, 27)).astype(np.float64)
    empty_row = counts.copy()
    empty_row[3] = 0
    for c, alpha, bits in [(counts, 1.0, 32), (empty_row, 0.5, 64), (counts + 1, 0.0, 32), (counts, 1e4, 32),
                           (rng.integers(0, 50, size=(4, 4)).astype(np.float64) + 1, 0.1, 64),
                           (empty_row, 0.0, 32), (counts, -0.1, 32)]:
        cases.append(("smoothed", c, alpha, bits))
    for V, n, as_tensor in [(27, 2000, 0), (27, 500, 1), (6, 1, 0)]:
        p = rng.random((V, V)) ** 3 + 1e-3
        cases.append(("nll", p / p.sum(axis=1, keepdims=True), rng.integers(0, V, n), rng.integers(0, V, n), as_tensor))
    with_zero = np.full((3, 3), 0.5)
    with_zero[:, 2] = 0  # column 2 never follows: a pair ending in 2 has probability 0
    cases.append(("nll", with_zero, np.array([0, 1, 1]), np.array([1, 2, 0]), 0))
    cases.append(("nll", with_zero, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 1))  # no pairs
    return cases


def _check_bigram(case: Case, outputs: tuple) -> str | None:
    kind = str(case[0])
    if kind == "counts":
        _, first, second, num, _ = case
        want = np.zeros((int(num), int(num)))
        np.add.at(want, (np.asarray(first, np.int64), np.asarray(second, np.int64)), 1)
        call = f"bigram_counts(first, second, {num}) of {np.size(first)} pairs"
        if len(outputs) != 2:
            return f"expected 2 outputs (N, its type), got {len(outputs)}"
        if _one(outputs, 1) != 1:
            return f"{call} must return a float32 Tensor"
        why = compare(outputs[:1], (want,), EXACT)
        return why and f"{call}: {why}"
    if kind == "smoothed":
        _, counts, alpha, bits = case
        counts = np.asarray(counts, np.float64)
        empty = bool((counts.sum(axis=1) == 0).any())
        call = f"smoothed(counts of shape {counts.shape}{' with a row of zeros' if empty else ''}, {alpha})"
        if alpha < 0 or (alpha == 0 and empty):
            return None if _raised(outputs) else f"{call} must raise ValueError"
        if len(outputs) != 3:
            return f"{call} raised ValueError" if _raised(outputs) else f"expected 3 outputs, got {len(outputs)}"
        if _one(outputs, 1) != 1:
            return f"{call} must return a float32 Tensor (whatever the counts' dtype)"
        if _one(outputs, 2) != 1:
            return f"{call} must return a new Tensor and leave the counts unchanged"
        want = (counts + alpha) / (counts + alpha).sum(axis=1, keepdims=True)
        why = compare(outputs[:1], (want,), Part(cases=lambda rng: [], rtol=1e-6, atol=1e-7))
        return why and f"{call}: {why}"
    _, probs, first, second, _ = case
    p = np.asarray(probs, np.float32).astype(np.float64)[np.asarray(first, np.int64), np.asarray(second, np.int64)]
    call = f"bigram_nll(probs, first, second) on {p.size} pairs"
    if len(outputs) != 2 or np.asarray(outputs[0]).size != 1:
        return f"expected 2 outputs (the NLL, one number, and its type), got {len(outputs)}"
    got = float(np.asarray(outputs[0], np.float64).reshape(-1)[0])
    if _one(outputs, 1) != 1:
        return f"{call} must return a Python float"
    if p.size == 0:
        return None if math.isnan(got) else f"{call}: the mean of no pairs is nan, got {got}"
    with np.errstate(divide="ignore"):
        want = float(-np.mean(np.log(p)))
    if math.isinf(want):
        return None if got == math.inf else f"{call}: a pair of probability 0 makes the NLL inf, got {got}"
    return None if math.isclose(got, want, rel_tol=1e-5) else f"{call} gives {got:.6f}, expected {want:.6f}"


# ---- draw --------------------------------------------------------------------------------------------------------

def inverse_cdf(z: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The grader's draw in float64 (as the notebook's `grader_draw` computes it): the smallest k with u < c_k,
    never past the row's last id of probability > 0."""
    p = np.exp(z - z.max(axis=1, keepdims=True))
    c = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    last = np.array([np.flatnonzero(row > 0).max() for row in p], dtype=np.int64)
    return np.minimum((c <= np.asarray(u, np.float64).reshape(-1, 1)).sum(axis=1), last)


def _filtered(logits, temperature, k, top_p, bits) -> np.ndarray:
    z = np.asarray(logits, np.float32 if bits == 32 else np.float64).astype(np.float64) / temperature
    if k:
        z = _top_k(z, int(k))
    if top_p:
        z = _top_p(z, float(top_p))
    return z


def _safe_rows(rng, n, V, scale, k, top_p) -> np.ndarray:
    """n rows of random logits whose nucleus (after top-k) is a thousandth away from its threshold: float32
    rounding cannot move an id in or out of it."""
    rows = []
    while len(rows) < n:
        z = rng.normal(size=(1, V)) * scale
        f = _top_k(z, k) if k else z
        if not top_p or np.all(np.abs(_mass_above(f) - top_p)[np.isfinite(f)] > 1e-3):
            rows.append(z[0])
    return np.array(rows)


def _draw_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, V, scale, T, k, top_p, bits, u_tensor in [
            (500, 27, 2.0, 1.0, 0, 0.0, 64, 0), (300, 10, 1.5, 0.5, 0, 0.0, 32, 1), (300, 27, 1.0, 2.0, 0, 0.0, 64, 1),
            (200, 27, 300.0, 0.7, 0, 0.0, 32, 0),  # logits in the hundreds: a stable softmax
            (400, 27, 2.0, 1.3, 5, 0.0, 64, 0), (400, 27, 2.0, 0.8, 0, 0.8, 32, 1), (400, 12, 2.0, 1.0, 4, 0.7, 64, 0),
            (3, 5, 1.0, 1.0, 0, 0.0, 64, 0), (1, 1, 1.0, 1.0, 0, 0.0, 64, 0)]:
        z = _safe_rows(rng, n, V, scale, k, top_p) if top_p else rng.normal(size=(n, V)) * scale
        cases.append((z * T, rng.random(n), T, k, top_p, bits, u_tensor))
    z = rng.normal(size=(40, 9)) * 2  # u a hair below 1: the last id, or the last id kept
    for k in (0, 3):
        cases.append((z, np.full(40, 1 - 1e-9), 1.0, k, 0.0, 32, 0))
    cases += [(rng.normal(size=(2, 4)), rng.random(2), 0.0, 0, 0.0, 64, 0),
              (rng.normal(size=(2, 4)), rng.random(2), -1.0, 0, 0.0, 64, 0)]
    return cases


def _check_draw(case: Case, outputs: tuple) -> str | None:
    logits, u, T, k, top_p, bits, _ = case
    call = (f"draw(logits of shape {np.shape(logits)}, u, {T}" + (f", top_k={k}" if k else "")
            + (f", top_p={top_p}" if top_p else "") + ")")
    if T <= 0:
        return None if _raised(outputs) else f"{call} must raise ValueError"
    if len(outputs) != 3 or _one(outputs, 0) != 0:
        return f"{call} raised ValueError" if _raised(outputs) else f"expected 3 outputs, got {len(outputs)}"
    if _one(outputs, 2) != 1:
        return f"{call} must return an int64 Tensor"
    why = _check_draws(_filtered(logits, T, k, top_p, bits), np.asarray(u, np.float64), outputs[1])
    return why and f"{call}: {why}"


# ---- sample ------------------------------------------------------------------------------------------------------

def sample_reference(symbols, A, B, n, block, T, seed, max_len) -> tuple[list[str], int]:
    """The words text.sample draws with the grader's draw, and how many steps (model calls) it takes."""
    rng = np.random.default_rng(int(seed))
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    context = np.zeros((n, block), dtype=np.int64)
    out = np.zeros((n, max_len), dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    steps = 0
    for t in range(max_len):
        z = A[context[:, -1]] + B[context[:, 0]]
        ids = inverse_cdf(z / T, rng.random(n))
        steps += 1
        out[:, t] = np.where(alive, ids, 0)
        alive &= ids != 0
        if not alive.any():
            break
        context = np.concatenate([context[:, 1:], ids[:, None]], axis=1)
    words = []
    for row in out:
        ends = np.flatnonzero(row == 0)
        words.append("".join(symbols[i] for i in row[:ends[0] if ends.size else max_len]))
    return words, steps


def _sample_cases(rng: np.random.Generator) -> list[Case]:
    names = _names()
    counts = np.ones((27, 27))
    for w in names[:5000]:
        ids = [0] + [LETTERS.index(c) for c in w] + [0]
        np.add.at(counts, (ids[:-1], ids[1:]), 1)
    bigram = np.log(counts / counts.sum(axis=1, keepdims=True))
    cases: list[Case] = [(LETTERS, bigram, np.zeros((27, 27)), 300, 1, 1.0, int(rng.integers(0, 10**6)), 25)]
    for V, n, block, T, max_len in [(27, 100, 3, 0.7, 15), (27, 50, 2, 1.8, 12), (6, 1, 4, 1.0, 10)]:
        A, B = rng.normal(size=(V, V)) * 1.5, rng.normal(size=(V, V)) * 0.5
        A[:, 0] += 1.0
        symbols = LETTERS[:V] if V == 27 else ".01234"
        cases.append((symbols, A, B, n, block, T, int(rng.integers(0, 10**6)), max_len))
    never = rng.normal(size=(4, 4))
    never[:, 0] = -40.0  # the boundary is never drawn: every word is max_len long
    cases.append((".xyz", never, np.zeros((4, 4)), 5, 2, 1.0, int(rng.integers(0, 10**6)), 6))
    once = np.full((4, 4), -40.0)
    once[0, 2], once[1:, 0] = 0.0, 0.0  # "y" after the boundary, then the boundary: every word is "y"
    cases.append((".xyz", once, np.zeros((4, 4)), 7, 3, 0.5, int(rng.integers(0, 10**6)), 9))
    cases.append(("ab.", np.zeros((3, 3)), np.zeros((3, 3)), 2, 1, 1.0, 0, 5))  # no boundary at id 0
    return cases


def _check_sample(case: Case, outputs: tuple) -> str | None:
    symbols, A, B, n, block, T, seed, max_len = case
    call = f"sample(model, vocab of {symbols!r}, {n}, {block}, {T}, np.random.default_rng({seed}), max_len={max_len})"
    if symbols[0] != ".":
        return None if _raised(outputs) else f"{call} must raise ValueError (id 0 is not the boundary '.')"
    if len(outputs) != 5 or _one(outputs, 0) != 0:
        return f"{call} raised ValueError" if _raised(outputs) else f"expected 5 outputs, got {len(outputs)}"
    if _one(outputs, 3) != 1:
        return f"{call} must return a list of strings"
    if _one(outputs, 4) != 1:
        return (f"{call}: the model must get (n, block_size) int64 Tensors of context ids, the first all "
                "boundaries (id 0)")
    want, steps = sample_reference(symbols, A, B, int(n), int(block), float(T), seed, int(max_len))
    got = _strings(outputs[1])
    if got != want:
        i = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        return (f"{call} gives {len(got)} words, word {i} {got[i] if i < len(got) else None!r}; expected {len(want)}, "
                f"word {i} {want[i] if i < len(want) else None!r}")
    if _one(outputs, 2) != steps:
        return (f"{call} called the model {_one(outputs, 2)} times, expected {steps} (one step per symbol, with one "
                "generator.random(n) each, until every word has ended or max_len)")
    return None


# ---- mlp -----------------------------------------------------------------------------------------------------------

MLP_NAMES = ["embedding.weight", "hidden.weight", "hidden.bias", "out.weight", "out.bias"]


def mlp_init(V: int, d: int, h: int, block: int, seed: int) -> list[np.ndarray]:
    """The MLP's initial parameters after tg.manual_seed(seed), drawn as teenygrad draws them (float32 from
    np.random.default_rng(seed)): nn.Embedding's normal table, nn.Linear's uniform weights and biases (hidden's,
    then out's, overwritten after), then kaiming_normal_(hidden.weight, "tanh") and normal_(out.weight, std=0.01)."""
    rng = np.random.default_rng(seed)
    C = rng.standard_normal(V * d, dtype=np.float32).reshape(V, d)
    for size in (h * block * d, h, V * h, V):  # the Linears' own initialisation: drawn, then overwritten
        rng.random(size, dtype=np.float32)
    W1 = rng.standard_normal(h * block * d, dtype=np.float32).reshape(h, block * d) * ((5 / 3) / math.sqrt(block * d))
    W2 = rng.standard_normal(V * h, dtype=np.float32).reshape(V, h) * 0.01
    return [C.astype(np.float64), W1.astype(np.float64), np.zeros(h), W2.astype(np.float64), np.zeros(V)]


def mlp_reference(params: list[np.ndarray], X, Y) -> tuple[np.ndarray, list[np.ndarray]]:
    """The logits of X, and the gradients of the mean cross-entropy against Y, in float64."""
    C, W1, b1, W2, b2 = params
    X, Y = np.asarray(X, np.int64), np.asarray(Y, np.int64)
    n = len(X)
    E = C[X].reshape(n, -1)
    H = np.tanh(E @ W1.T + b1)
    Z = H @ W2.T + b2
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    dZ = P.copy()
    dZ[np.arange(n), Y] -= 1
    dZ /= n
    dA = (dZ @ W2) * (1 - H ** 2)
    dC = np.zeros_like(C)
    np.add.at(dC, X.reshape(-1), (dA @ W1).reshape(-1, C.shape[1]))
    return Z, [dC, dA.T @ E, dA.sum(axis=0), dZ.T @ H, dZ.sum(axis=0)]


def _mlp_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for V, d, h, block, n, as_tensor in [(27, 10, 200, 3, 64, 0), (5, 2, 4, 1, 9, 1), (11, 3, 7, 4, 30, 0),
                                         (27, 4, 16, 2, 1, 1)]:
        X, Y = rng.integers(0, V, size=(n, block)), rng.integers(0, V, size=n)
        cases.append((V, d, h, block, int(rng.integers(0, 10**6)), X, Y, as_tensor))
    return cases


def _close(got, want, rel: float) -> bool:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= rel * np.abs(want).max(initial=0) + 1e-9))


def _check_mlp(case: Case, outputs: tuple) -> str | None:
    V, d, h, block, seed, X, Y, _ = case
    what = f"MLPLanguageModel({V}, emb_dim={d}, hidden={h}, block_size={block}) after tg.manual_seed({seed})"
    if len(outputs) != 12:
        return f"expected 12 outputs (names, 5 parameters, logits, 5 gradients), got {len(outputs)}"
    names = _strings(outputs[0])
    if names != MLP_NAMES:
        return f"{what}: its parameters are {names}, expected {MLP_NAMES} (the layers embedding, hidden, out)"
    want = mlp_init(int(V), int(d), int(h), int(block), int(seed))
    for name, got, w in zip(MLP_NAMES, outputs[1:6], want):
        if np.shape(got) != w.shape:
            return f"{what}: {name} has shape {np.shape(got)}, expected {w.shape}"
        if not _close(got, w, 1e-6):
            return (f"{what}: {name} is not the book's initial value (create embedding, hidden and out in that "
                    "order, then hidden's weight Kaiming-normal for tanh and its bias 0, then out's weight normal with "
                    "std 0.01 and its bias 0)")
    logits, grads = mlp_reference(want, X, Y)
    if not _close(outputs[6], logits, 1e-4):
        return f"{what}: wrong logits for contexts of shape {np.shape(X)}" + (
            f" (shape {np.shape(outputs[6])})" if np.shape(outputs[6]) != logits.shape else "")
    for name, got, w in zip(MLP_NAMES, outputs[7:], grads):
        if not _close(got, w, 1e-3):
            return (f"{what}: the gradient of {name} is wrong (the forward pass must be Tensor operations on the "
                    "parameters, so that backward reaches them)")
    return None


# ---- evaluate -------------------------------------------------------------------------------------------------------

def _evaluate_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, V, block, batch, as_tensor in [(1000, 27, 3, -1, 0), (1000, 27, 3, 128, 1), (50, 8, 2, 7, 0),
                                          (64, 8, 1, 64, 1), (30, 5, 2, 1000, 0), (1, 4, 2, 1, 0)]:
        T1, T2 = rng.normal(size=(V, V)) * 2, rng.normal(size=(V, V))
        X, Y = rng.integers(0, V, size=(n, block)), rng.integers(0, V, size=n)
        cases.append((X, Y, T1, T2, batch, as_tensor))
    T = rng.normal(size=(4, 4))
    cases.append((np.zeros((0, 2), np.int64), np.zeros(0, np.int64), T, T, -1, 0))  # no rows
    cases.append((rng.integers(0, 4, size=(5, 2)), rng.integers(0, 4, size=5), T, T, 0, 0))  # batch_size 0
    return cases


def _check_evaluate(case: Case, outputs: tuple) -> str | None:
    X, Y, T1, T2, batch, _ = case
    X, Y = np.asarray(X, np.int64), np.asarray(Y, np.int64)
    n = len(Y)
    call = f"evaluate(model, X of shape {X.shape}, Y" + ("" if batch == -1 else f", batch_size={batch}") + ")"
    if n == 0 or batch == 0:
        return None if _raised(outputs) else f"{call} must raise ValueError"
    if len(outputs) != 5 or _one(outputs, 0) != 0:
        return f"{call} raised ValueError" if _raised(outputs) else f"expected 5 outputs, got {len(outputs)}"
    Z = np.asarray(T1, np.float64)[X[:, 0]] + np.asarray(T2, np.float64)[X[:, -1]]
    m = Z.max(axis=1)
    want = float(np.mean(m + np.log(np.exp(Z - m[:, None]).sum(axis=1)) - Z[np.arange(n), Y]))
    step = n if batch == -1 else int(batch)
    sizes = [min(step, n - s) for s in range(0, n, step)]
    got_sizes = np.asarray(outputs[3]).reshape(-1).tolist()
    if got_sizes != sizes:
        return f"{call} called the model on batches of {got_sizes} rows, expected {sizes}"
    rows = np.asarray(outputs[4])
    if rows.shape != X.shape or not np.array_equal(rows, X):
        return f"{call}: the model must see the rows of X in order, batch after batch"
    if _one(outputs, 2) != 1:
        return f"{call} must return a Python float"
    got = float(np.asarray(outputs[1], np.float64).reshape(-1)[0])
    if not math.isclose(got, want, rel_tol=1e-7):
        return f"{call} gives {got:.8f}, expected the mean over all rows {want:.8f} (weight each batch by its rows)"
    return None


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
    "vocab": Part(cases=_vocab_cases, check=_check_vocab),
    "split": Part(cases=_split_cases, check=_check_split),
    "windows": Part(cases=_windows_cases, check=_check_windows),
    "bigram": Part(cases=_bigram_cases, check=_check_bigram),
    "draw": Part(cases=_draw_cases, check=_check_draw),
    "sample": Part(cases=_sample_cases, check=_check_sample),
    "index_add": Part(cases=_index_add_cases, check=_check_index_add),
    "mlp": Part(cases=_mlp_cases, check=_check_mlp),
    "evaluate": Part(cases=_evaluate_cases, check=_check_evaluate),
    "top_k_logits": Part(cases=_top_k_cases, check=lambda case, got: _check_filter("top_k_logits", _top_k, case, got)),
    "top_p_logits": Part(cases=_top_p_cases, check=lambda case, got: _check_filter("top_p_logits", _top_p, case, got)),
}
