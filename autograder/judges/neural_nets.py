"""Judge for assignment 07-neural-nets: the machinery chapter 7's networks train on
(exercises/07-neural-nets.ipynb).

The learner writes fourteen parts of teenygrad; the hidden tests install them and run teenygrad on the cases below,
and this judge checks the outputs in numpy float64 (or against the names a structure must list).

  modules          (structure, seed)                  -> (module names, parameter names, 1 where the tensor is
                                                         the attribute its name leads to)
                   (structure, mutation, seed)        -> load_state_dict: (what was raised, the parameters after,
                                                         the values before and the state's, returned self)
  kaiming          (shape, nonlinearity, kind, seed)  -> (values, returned t itself, reproducible)
                   (shape of 1 dim, ...)              -> 1 if ValueError was raised
  sgd_update       (p0, grads (steps, n), lr, momentum, wd, dtype bits)
                                                      -> the parameter after each step of optim.SGD
                   (p, g, buf, lr, momentum, wd)      -> (p, g, buf) after one call on buffers
  adam_update      (p0, grads (steps, n), lr, b1, b2, eps, wd, decoupled, dtype bits)
                                                      -> the parameter after each step of optim.Adam/AdamW
                   (p, g, m, v, lr, b1, b2, eps, wd, decoupled, t)  -> (p, g, m, v) after one call on buffers
  lr_at            (total, base_lr, warmup, kind, min_lr)  -> the rate of every step 0 .. total + 2
                   (total, base_lr, warmup, an unknown kind, min_lr)  -> 1 if ValueError was raised
  clip_grad_norm   (flat grads, sizes, has grad, repeated index, max_norm)
                                                      -> (norm before, gradients after, nan where None)
  optimizer        (tensor codes,)                    -> collect_params: (error code, positions kept)
                   (seed, has grad (n,))              -> (opt.steps after two steps, _update's parameter numbers,
                                                         the values after, every .grad None after zero_grad)
  dropout          (shape, p, training, seed, dtype bits)  -> (values, x itself returned, dL/dx of a sum)
                   (shape, p outside [0, 1), ...)     -> 1 if ValueError was raised
                   ("module", shape, p, training, seed, bits)  -> nn.Dropout: (values, x itself returned, its p)
  xavier           ("fans", shape)                    -> (fan_in, fan_out), or 1 if ValueError was raised
                   ("gain", name)                     -> (the gain, 1 if ValueError was raised)
                   ("xavier", shape, gain, kind, seed)  -> (values, returned t itself, reproducible)
  linear           ("init", in, out, bias, bits, seed)  -> (weight, bias or empty, [in, out, bias is None, leaves,
                                                         dtype bits, reproducible])
                   ("error", in, out)                 -> 1 if ValueError was raised
                   ("forward", x, W, b, has bias, g)  -> (y, dL/dx, dL/dW, dL/db or empty, 1 if y's op is "linear")
                                                         of L = sum(g * y), float64
                   ("train", seed, steps)             -> the losses of a 2-16-3 network of nn.Linear, SGD by hand
  embedding        ("init", num, dim, bits, seed)     -> (weight, [num, dim, leaf, dtype bits, reproducible])
                   ("error", num, dim)                -> 1 if ValueError was raised
                   ("forward", ids, table, g)         -> (rows, dL/dtable) of L = sum(g * rows), float64
  layer_norm       ("init", dim, eps, bias, bits)     -> (weight, bias or empty, [dim, eps, bias is None, leaves, bits])
  rms_norm         ("error", dim, eps)                -> 1 if ValueError was raised
                   ("forward", x, w, b, has bias, eps)  -> the layer's output (rms_norm: b unused), float64
  batches          (n, batch_size, shuffle, drop_last, seed, seeded teenygrad)
                                                      -> (rows in the order served, batch sizes, all checks held)
                   (n, batch_size, first dim of the second tensor)  -> 1 if the call itself raised ValueError
Training cases (seed, steps): a 2-16-3 tanh network on three blobs (its parameters listed by hand, so no other part
runs), AdamW with the learner's update or SGD with momentum and the learner's update; every loss finite and the last
below TRAINING_LOSS.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judges import Case, Part, compare

TRAINING_LOSS = 0.1  # stated in the exercise's visible tests; the reference runs end below 0.02
TRAINING_STEPS = 100
GAINS = {"relu": math.sqrt(2.0), "tanh": 5.0 / 3.0, "linear": 1.0, "sigmoid": 1.0}


# The blob problems a training case draws from. Each one's reference run ends below TRAINING_LOSS / 5 with both
# optimizers (tests/test_ch07_neural_nets.py runs them all). A seed drawn from all of 0..10**6 could be a problem too
# hard for 100 steps: CI once graded the book's own update 0 for a run that ended at 0.121.
TRAINING_SEEDS = range(1, 33)


def _training_case(rng: np.random.Generator) -> Case:
    return int(rng.choice(TRAINING_SEEDS)), TRAINING_STEPS


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


# ---- kaiming ------------------------------------------------------------------------------------------------

def _kaiming_cases(rng: np.random.Generator) -> list[Case]:
    shapes = [(400, 300), (256, 3, 7, 7), (100, 500, 1), (30, 2000), (2000, 30)]
    cases = []
    for i, shape in enumerate(shapes):
        for kind in ("uniform", "normal"):
            nonlin = ["relu", "tanh", "linear", "sigmoid"][(i + (kind == "normal")) % 4]
            cases.append((np.array(shape), nonlin, kind, int(rng.integers(0, 10**6))))
    return cases + [(np.array([7]), "relu", "uniform", 0), (np.array([7]), "relu", "normal", 0)]


def _check_kaiming(case: Case, outputs: tuple) -> str | None:
    shape, nonlin, kind = tuple(int(s) for s in np.atleast_1d(case[0])), str(case[1]), str(case[2])
    if len(shape) < 2:
        raised = len(outputs) == 1 and outputs[0].size == 1 and int(outputs[0].reshape(-1)[0]) == 1
        return None if raised else f"kaiming_{kind}_ of a tensor of shape {shape} must raise ValueError (no fan in)"
    if len(outputs) != 3:
        return f"expected (values, is t, reproducible), got {len(outputs)} outputs"
    w, same, again = np.asarray(outputs[0], dtype=np.float64), int(outputs[1]), int(outputs[2])
    name = f"kaiming_{kind}_({shape}, {nonlin!r})"
    if w.shape != shape:
        return f"{name}: the tensor has shape {w.shape}"
    if not same:
        return f"{name}: must fill t in place and return t itself"
    if not again:
        return f"{name}: two draws after the same tg.manual_seed differ (draw from teenygrad's generator)"
    fan_in = shape[1] * math.prod(shape[2:])
    std = GAINS[nonlin] / math.sqrt(fan_in)
    if kind == "uniform" and np.abs(w).max() > std * math.sqrt(3) * (1 + 1e-5):
        return f"{name}: values up to {np.abs(w).max():.4g}, beyond the bound of a uniform with std {std:.4g}"
    if abs(w.std() / std - 1) > 0.03 or abs(w.mean()) > 0.03 * std:
        return f"{name}: mean {w.mean():.3g} and std {w.std():.4g}; expected mean 0 and std {std:.4g} (fan in {fan_in})"
    if kind == "normal" and np.mean(np.abs(w) > 2 * std) < 0.03:  # a normal has 4.6% beyond 2 std, a uniform none
        return f"{name}: the values are not spread like a normal distribution"
    return None


# ---- adam_update --------------------------------------------------------------------------------------------

def _adam_trajectory(p0, grads, lr, b1, b2, eps, wd, decoupled, dtype):
    p, m, v, out = np.asarray(p0, np.float64), np.zeros(np.shape(p0)), np.zeros(np.shape(p0)), []
    for t, g in enumerate(np.asarray(grads, np.float64), 1):
        if decoupled:
            p = p - lr * wd * p
        else:
            g = g + wd * p
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        out.append(p)
    return np.array(out)


def _adam_call(p, g, m, v, lr, b1, b2, eps, wd, decoupled, t):
    p, g, m, v = (np.asarray(a, np.float64) for a in (p, g, m, v))
    gd = g if decoupled else g + wd * p
    p2 = p * (1 - lr * wd) if decoupled else p
    m2, v2 = b1 * m + (1 - b1) * gd, b2 * v + (1 - b2) * gd * gd
    return p2 - lr * (m2 / (1 - b1 ** t)) / (np.sqrt(v2 / (1 - b2 ** t)) + eps), g, m2, v2


def _adam_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, steps, lr, b1, b2, eps, wd, decoupled in [
            (6, 4, 0.01, 0.9, 0.999, 1e-8, 0.0, False), (5, 6, 0.01, 0.9, 0.999, 1e-8, 0.1, False),
            (7, 6, 0.01, 0.9, 0.999, 1e-8, 0.1, True), (4, 5, 0.1, 0.8, 0.99, 1e-6, 0.5, True),
            (3, 3, 0.003, 0.0, 0.9, 1e-3, 0.02, False), (8, 5, 0.05, 0.9, 0.95, 1e-8, 0.0, True)]:
        grads = rng.normal(size=(steps, n)) * 10.0 ** rng.integers(-3, 3, size=(steps, n))
        cases.append((rng.normal(size=n), grads, lr, b1, b2, eps, wd, decoupled, 64))
    grads = rng.normal(size=(4, 9))
    cases.append((rng.normal(size=9), grads, 0.01, 0.9, 0.999, 1e-8, 0.1, True, 32))  # float32 parameters
    for wd, decoupled, t in [(0.0, False, 1), (0.3, False, 7), (0.3, True, 7), (0.01, True, 1000)]:
        n = 10
        cases.append((rng.normal(size=n), rng.normal(size=n), rng.normal(size=n) * 0.1, rng.random(n) ** 2,
                      0.02, 0.9, 0.99, 1e-8, wd, decoupled, t))
    return cases + [_training_case(rng)]


def _check_adam(case: Case, outputs: tuple) -> str | None:
    if len(case) == 2:
        return _check_training(case, outputs)
    if len(case) == 11:
        why = compare(outputs, _adam_call(*case), Part(cases=lambda rng: [], rtol=1e-9, atol=1e-12))
        return why and f"one call on buffers (p, g, m, v afterwards; decoupled={bool(case[9])}, t={case[10]}): {why}"
    f32 = case[8] == 32
    want = _adam_trajectory(*case)
    part = Part(cases=lambda rng: [], rtol=1e-4 if f32 else 1e-9, atol=1e-6 if f32 else 1e-12)
    why = compare(outputs, (want,), part)
    kind = ("AdamW" if case[7] else "Adam") + f" (weight_decay {case[6]}{', float32' if f32 else ''})"
    return why and f"{kind}: the parameter after each step: {why}"


# ---- clip_grad_norm ---------------------------------------------------------------------------------------------

def _clip_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for sizes, has_grad, max_norm in [([12, 5, 8], [1, 1, 1], 1.0), ([3, 7, 2, 9], [1, 0, 1, 1], 0.5),
                                      ([20], [1], 100.0), ([4, 4], [0, 1], 2.0), ([6, 3, 5], [1, 1, 0], 0.01)]:
        flat = rng.normal(size=sum(sizes)) * rng.choice([0.1, 1.0, 10.0])
        repeat = int(rng.choice(np.flatnonzero(has_grad)))
        cases.append((flat, np.array(sizes), np.array(has_grad), repeat, max_norm))
    cases.append((np.zeros(6), np.array([2, 4]), np.array([1, 1]), 0, 1.0))  # all zero: nothing to clip
    return cases


def _clip_reference(flat, sizes, has_grad, repeat, max_norm):
    pieces = np.split(np.asarray(flat, np.float64), np.cumsum(sizes)[:-1])
    total = math.sqrt(sum(float((g ** 2).sum()) for g, k in zip(pieces, has_grad) if k))
    coef = max_norm / (total + 1e-6)
    after = [(g * coef if coef < 1 else g) if k else np.full(len(g), np.nan) for g, k in zip(pieces, has_grad)]
    return np.float64(total), np.concatenate(after)


def _check_clip(case: Case, outputs: tuple) -> str | None:
    total, after = _clip_reference(*case)
    if len(outputs) != 2 or outputs[0].size != 1:
        return "expected the norm (one number) and the gradients"
    if not np.isclose(float(outputs[0].reshape(-1)[0]), total, rtol=1e-9, atol=1e-12):
        return f"returned {float(outputs[0].reshape(-1)[0]):.6g}; the norm before clipping is {total:.6g}"
    got = np.asarray(outputs[1], np.float64)
    if got.shape != after.shape:
        return f"gradients of {got.size} elements, expected {after.size}"
    if not np.array_equal(np.isnan(got), np.isnan(after)):
        return "a parameter without a gradient must keep .grad = None (and one with a gradient keep it)"
    ok = ~np.isnan(after)
    if not np.allclose(got[ok], after[ok], rtol=1e-9, atol=1e-12):
        return f"wrong gradients after clipping to {case[4]}: largest error {np.max(np.abs(got[ok] - after[ok])):.3g}"
    return None


# ---- modules and load_state_dict ------------------------------------------------------------------------------

# The structures the hidden tests build (the notebook's `build(structure, seed)` makes them), and what a right
# named_modules / named_parameters lists for each, in order. 0: Sequential(Linear(3, 4), Tanh(), Linear(4, 2)).
# 1: a module whose `blocks` list holds two blocks (each a Linear and a LayerNorm) and whose `head` is blocks[0]
# again (shared: listed once, under its first name), plus a tensor computed in forward kept as an attribute (not a
# leaf) and a constant that does not require grad. 2: a tied weight (the embedding's table is the head's weight) and a
# child that holds its parent (a cycle). 3: a tuple of two Linears without bias, and an empty Sequential.
STRUCTURES = {
    0: (["", "0", "1", "2"], ["0.weight", "0.bias", "2.weight", "2.bias"]),
    1: (["", "blocks.0", "blocks.0.lin", "blocks.0.norm", "blocks.1", "blocks.1.lin", "blocks.1.norm"],
        ["scale", "blocks.0.lin.weight", "blocks.0.lin.bias", "blocks.0.norm.weight", "blocks.0.norm.bias",
         "blocks.1.lin.weight", "blocks.1.lin.bias", "blocks.1.norm.weight", "blocks.1.norm.bias"]),
    2: (["", "embed", "head", "child"], ["embed.weight", "head.bias"]),
    3: (["", "pair.0", "pair.1", "empty"], ["pair.0.weight", "pair.1.weight"]),
}
# load_state_dict's mutations of the state a right model saved: 0 none (values change to the state's), 1 a key
# missing, 2 an unexpected key, 3 a shape that differs, 4 float64 values for float32 parameters (cast, accepted)
MUTATIONS = {0: None, 1: "KeyError", 2: "KeyError", 3: "ValueError", 4: None}
MUTATION_NAMES = ["a matching state", "a state missing a key", "a state with an extra key",
                  "a state with a wrong shape", "float64 values for float32 parameters"]
RAISED = {0: None, 1: "KeyError", 2: "ValueError", 3: "another exception"}


def _modules_cases(rng: np.random.Generator) -> list[Case]:
    listing = [(structure, int(rng.integers(0, 10**6))) for structure in STRUCTURES]
    loading = [(structure, mutation, int(rng.integers(0, 10**6))) for structure in (0, 1) for mutation in MUTATIONS]
    return listing + loading


def _names(a: np.ndarray) -> list[str]:
    return [str(x) for x in np.asarray(a).reshape(-1)]


def _check_modules(case: Case, outputs: tuple) -> str | None:
    if len(case) == 3:
        return _check_load(case, outputs)
    if len(outputs) != 3:
        return f"expected (module names, parameter names, sums), got {len(outputs)} outputs"
    modules, params = STRUCTURES[int(case[0])]
    got_modules, got_params = _names(outputs[0]), _names(outputs[1])
    if got_modules != modules:
        return f"structure {case[0]}: named_modules() lists {got_modules}, expected {modules}"
    if got_params != params:
        return f"structure {case[0]}: named_parameters() lists {got_params}, expected {params}"
    own = np.asarray(outputs[2], np.float64).reshape(-1)
    if own.size != len(params) or not np.all(own == 1):
        return f"structure {case[0]}: each listed parameter must be the tensor its name leads to (not a copy)"
    return None


def _check_load(case: Case, outputs: tuple) -> str | None:
    if len(outputs) != 4:
        return f"expected (raised, values after, saved values, returned self), got {len(outputs)} outputs"
    raised, after, saved, same = int(outputs[0]), np.asarray(outputs[1], np.float64), outputs[2], int(outputs[3])
    before_or_state = np.asarray(saved, np.float64)  # row 0: the values before, row 1: the state's
    expected = MUTATIONS[int(case[1])]
    what = f"structure {case[0]}, {MUTATION_NAMES[int(case[1])]}"
    if RAISED.get(raised, "?") != expected:
        return f"{what}: expected {expected or 'no error'}, got {RAISED.get(raised) or 'no error'}"
    want = before_or_state[0] if expected else before_or_state[1]
    if after.shape != want.shape or not np.allclose(after, want, rtol=1e-6, atol=1e-7):
        return f"{what}: the parameters afterwards are wrong" + (" (a refused state must change nothing)"
                                                                  if expected else "")
    if not expected and not same:
        return f"{what}: load_state_dict must return the module itself"
    return None


# ---- sgd_update -------------------------------------------------------------------------------------------------

def _sgd_trajectory(p0, grads, lr, momentum, wd, dtype):
    p, buf, out = np.asarray(p0, np.float64), np.zeros(np.shape(p0)), []
    for g in np.asarray(grads, np.float64):
        d = g + wd * p
        if momentum:
            buf = momentum * buf + d
            d = buf
        p = p - lr * d
        out.append(p)
    return np.array(out)


def _sgd_call(p, g, buf, lr, momentum, wd):
    p, g, buf = (np.asarray(a, np.float64) for a in (p, g, buf))
    d = g + wd * p
    if momentum:
        buf = momentum * buf + d
        d = buf
    return p - lr * d, g, buf


def _sgd_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, steps, lr, momentum, wd in [(6, 4, 0.1, 0.0, 0.0), (5, 6, 0.05, 0.9, 0.0), (7, 5, 0.1, 0.9, 0.01),
                                       (4, 6, 0.5, 0.5, 0.1), (3, 3, 1.0, 0.0, 0.3)]:
        grads = rng.normal(size=(steps, n)) * 10.0 ** rng.integers(-2, 2, size=(steps, n))
        cases.append((rng.normal(size=n), grads, lr, momentum, wd, 64))
    cases.append((rng.normal(size=9), rng.normal(size=(4, 9)), 0.1, 0.9, 0.01, 32))  # float32 parameters
    for momentum, wd in [(0.9, 0.0), (0.9, 0.2), (0.0, 0.2)]:
        n = 8
        buf = rng.normal(size=n) if momentum else np.zeros(0)
        cases.append((rng.normal(size=n), rng.normal(size=n), buf, 0.05, momentum, wd))
    return cases + [_training_case(rng)]


def _check_sgd(case: Case, outputs: tuple) -> str | None:
    if len(case) == 2:
        return _check_training(case, outputs)
    if len(case) == 6 and np.ndim(case[1]) == 1:
        why = compare(outputs, _sgd_call(*case), Part(cases=lambda rng: [], rtol=1e-9, atol=1e-12))
        return why and f"one call on buffers (p, g, buf afterwards; momentum {case[4]}, weight_decay {case[5]}): {why}"
    f32 = case[5] == 32
    part = Part(cases=lambda rng: [], rtol=1e-4 if f32 else 1e-9, atol=1e-6 if f32 else 1e-12)
    why = compare(outputs, (_sgd_trajectory(*case),), part)
    return why and (f"SGD (lr {case[2]}, momentum {case[3]}, weight_decay {case[4]}{', float32' if f32 else ''}): "
                    f"the parameter after each step: {why}")


# ---- lr_at ------------------------------------------------------------------------------------------------------

def _lr_reference(total, base, warmup, kind, min_lr):
    out = []
    for step in range(int(total) + 3):
        if step < warmup:
            out.append(base * (step + 1) / warmup)
            continue
        q = min(1.0, max(0.0, (step - warmup) / max(1, total - warmup)))
        out.append({"cosine": min_lr + (base - min_lr) * 0.5 * (1 + math.cos(math.pi * q)),
                    "linear": base + (min_lr - base) * q, "constant": base}[kind])
    return np.array(out)


def _lr_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for kind in ("cosine", "linear", "constant"):
        for total, warmup, min_lr in [(int(rng.integers(20, 200)), int(rng.integers(1, 15)), 0.0),
                                      (int(rng.integers(20, 200)), 0, float(rng.uniform(1e-5, 1e-4))),
                                      (10, 12, 1e-4)]:  # a warmup longer than the run
            cases.append((total, float(rng.uniform(1e-4, 1e-2)), warmup, kind, min_lr))
    return cases + [(50, 0.01, 5, "step", 0.0)]


def _check_lr(case: Case, outputs: tuple) -> str | None:
    total, base, warmup, kind, min_lr = case
    if kind not in ("cosine", "linear", "constant"):
        raised = len(outputs) == 1 and outputs[0].size == 1 and int(outputs[0].reshape(-1)[0]) == 1
        return None if raised else f"lr_at(..., kind={kind!r}) must raise ValueError"
    why = compare(outputs, (_lr_reference(*case),), Part(cases=lambda rng: [], rtol=1e-9, atol=1e-15))
    return why and f"kind {kind!r}, {total} steps, warmup {warmup}, min_lr {min_lr:.3g}: the rate of each step: {why}"


# ---- batches -----------------------------------------------------------------------------------------------------

def _batches_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, batch, shuffle, drop_last, seeded in [(23, 5, 1, 0, 0), (23, 5, 1, 1, 0), (16, 4, 0, 0, 0),
                                                 (17, 4, 0, 1, 0), (7, 10, 1, 0, 0), (7, 10, 1, 1, 0),
                                                 (30, 7, 1, 0, 1), (1, 1, 1, 0, 0)]:
        cases.append((n, batch, shuffle, drop_last, int(rng.integers(0, 10**6)), seeded))
    return cases + [(10, 3, 9), (10, 0, 10)]


def _check_batches(case: Case, outputs: tuple) -> str | None:
    if len(case) == 3:
        n, batch, other = case
        raised = len(outputs) == 1 and outputs[0].size == 1 and int(outputs[0].reshape(-1)[0]) == 1
        why = f"first dims {n} and {other}" if other != n else f"batch_size={batch}"
        return None if raised else f"batches(...) with {why} must raise ValueError when it is called"
    n, batch, shuffle, drop_last, seed, seeded = case
    if len(outputs) != 3:
        return f"expected (rows served, batch sizes, checks), got {len(outputs)} outputs"
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    end = n - n % batch if drop_last else n
    sizes = [min(batch, end - s) for s in range(0, end, batch)]
    what = (f"{n} rows, batch_size={batch}, shuffle={bool(shuffle)}, drop_last={bool(drop_last)}"
            + (", rng=None after tg.manual_seed" if seeded else ""))
    if int(np.asarray(outputs[2]).reshape(-1)[0]) != 1:
        return f"{what}: each batch must be a tuple of Tensors, one per input, holding the same rows of each"
    if np.asarray(outputs[1]).reshape(-1).tolist() != sizes:
        return f"{what}: batch sizes {np.asarray(outputs[1]).reshape(-1).tolist()}, expected {sizes}"
    if np.asarray(outputs[0]).reshape(-1).tolist() != order[:end].tolist():
        return (f"{what}: the rows come in the wrong order (expected "
                + ("rng.permutation(N), drawn once" if shuffle else "0, 1, 2, ...") + ")")
    return None


# ---- optimizer: collect_params, step, zero_grad ----------------------------------------------------------------

# collect_params's cases are lists of codes, one tensor each: 0 a new float64 parameter, 1 the previous new parameter
# again (tied), 2 a new float32 parameter, 3 a tensor computed from a parameter (not a leaf), 4 a constant (no grad),
# 5 a leaf that requires grad but is not contiguous (a transposed view)
COLLECT_ERRORS = {0: None, 1: "TypeError", 2: "ValueError", 3: "another exception"}


def _collect_expected(codes) -> tuple[str | None, list[int]]:
    codes = [int(c) for c in np.atleast_1d(codes)]
    if any(c in (3, 4, 5) for c in codes):
        return "TypeError", []
    kept = [i for i, c in enumerate(codes) if c in (0, 2)]
    return (None, kept) if kept else ("ValueError", [])


def _step_values(seed: int, has_grad) -> tuple[np.ndarray, np.ndarray]:
    """The parameters (n, 3) and gradients a step case starts from (the hidden tests draw the same)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(len(has_grad), 3)), rng.normal(size=(len(has_grad), 3))


def _optimizer_cases(rng: np.random.Generator) -> list[Case]:
    collect = [[0, 2, 0], [0, 1, 2, 1], [0, 0, 1, 1], [0, 3], [4, 0], [0, 5], []]
    cases: list[Case] = [(np.array(c, dtype=np.int64),) for c in collect]
    for n in (1, 4, 6):
        has_grad = (rng.random(n) < 0.7).astype(np.int64)
        cases.append((int(rng.integers(0, 10**6)), has_grad))
    return cases


def _check_optimizer(case: Case, outputs: tuple) -> str | None:
    if len(case) == 1:
        error, kept = _collect_expected(case[0])
        codes = np.atleast_1d(case[0]).tolist()
        if len(outputs) != 2:
            return f"expected (error code, kept positions), got {len(outputs)} outputs"
        got_error = COLLECT_ERRORS.get(int(outputs[0]), "?")
        if got_error != error:
            return (f"collect_params on tensors coded {codes}: expected {error or 'no error'}, "
                    f"got {got_error or 'no error'}")
        if error is None and np.asarray(outputs[1]).reshape(-1).tolist() != kept:
            return (f"collect_params on tensors coded {codes} kept the tensors at {np.asarray(outputs[1]).tolist()}, "
                    f"expected {kept} (each once, in order)")
        return None
    seed, has_grad = case
    p0, g = _step_values(seed, has_grad)
    on = np.asarray(has_grad, bool)
    if len(outputs) != 4:
        return f"expected (steps, parameters updated, values after, grads cleared), got {len(outputs)} outputs"
    if int(outputs[0]) != 2:
        return f"after two step() calls, opt.steps is {int(outputs[0])}"
    visited = np.asarray(outputs[1]).reshape(-1).tolist()
    want = [i for i in range(len(on)) if on[i]] * 2
    if visited != want:
        return (f"two step() calls ran _update for parameters {visited}; with gradients on "
                f"{np.flatnonzero(on).tolist()} they should be {want}")
    after = np.asarray(outputs[2], np.float64)
    expected = p0 - 0.2 * g * on[:, None]
    if after.shape != expected.shape or not np.allclose(after, expected, rtol=1e-12, atol=1e-12):
        return "the updates did not reach the parameters (pass _update the parameter's own memory: flat_buffer)"
    if int(outputs[3]) != 1:
        return "zero_grad() must set every parameter's .grad to None"
    return None


# ---- dropout --------------------------------------------------------------------------------------------------------

def _dropout_cases(rng: np.random.Generator) -> list[Case]:
    cases = [(np.array(shape), p, training, int(rng.integers(0, 10**6)), bits)
             for shape, p, training, bits in [((40, 30), 0.5, 1, 64), ((7, 5, 3), 0.1, 1, 32), ((1000,), 0.9, 1, 64),
                                              ((6, 4), 0.5, 0, 64), ((6, 4), 0.0, 1, 32)]]
    return cases + [(np.array((3,)), 1.0, 1, 0, 64), (np.array((3,)), -0.1, 1, 0, 64)]


def _check_dropout(case: Case, outputs: tuple) -> str | None:
    shape, p, training, seed, bits = tuple(int(s) for s in np.atleast_1d(case[0])), float(case[1]), *case[2:]
    if not 0 <= p < 1:
        raised = len(outputs) == 1 and outputs[0].size == 1 and int(outputs[0].reshape(-1)[0]) == 1
        return None if raised else f"dropout with p={p} must raise ValueError"
    if len(outputs) != 3:
        return f"expected (values, x itself returned, gradient), got {len(outputs)} outputs"
    dt = np.float32 if bits == 32 else np.float64
    x = np.random.default_rng(seed + 1).normal(size=shape).astype(dt)
    what = f"dropout(x of shape {shape}, p={p}, training={bool(training)})"
    if not training or p == 0:
        return None if int(outputs[1]) == 1 else f"{what} must return x itself"
    keep = (np.random.default_rng(seed).random(int(np.prod(shape)), dtype=dt).reshape(shape) >= p).astype(np.float64)
    want = x.astype(np.float64) * keep / (1 - p)
    got = np.asarray(outputs[0], np.float64)
    tol = dict(rtol=1e-5, atol=1e-6) if bits == 32 else dict(rtol=1e-12, atol=1e-12)
    if got.shape != want.shape or not np.allclose(got, want, **tol):
        return (f"{what}: wrong values (keep where tg.rand(*x.shape, dtype=x.dtype) >= p, drawn from teenygrad's "
                "generator, and scale what is kept by 1 / (1 - p))")
    if outputs[2] is not None and not np.allclose(np.asarray(outputs[2], np.float64), keep / (1 - p), **tol):
        return f"{what}: the gradient with respect to x must be the mask scaled by 1 / (1 - p)"
    return None


# ---- dropout's module ------------------------------------------------------------------------------------------------

def _dropout_module_cases(rng: np.random.Generator) -> list[Case]:
    out = [("module", np.array(shape), p, training, int(rng.integers(0, 10**6)), bits)
           for shape, p, training, bits in [((30, 20), 0.3, 1, 64), ((5, 4), 0.6, 0, 32), ((50,), 0.0, 1, 64)]]
    return out + [("module", np.array((3,)), 1.0, 1, 0, 64), ("module", np.array((3,)), -0.5, 0, 0, 64)]


def _check_dropout_module(case: Case, outputs: tuple) -> str | None:
    _, shape, p, training, seed, bits = case
    what = f"nn.Dropout({p}) with training={bool(training)}"
    if not 0 <= p < 1:
        raised = len(outputs) == 1 and outputs[0].size == 1 and int(outputs[0].reshape(-1)[0]) == 1
        return None if raised else f"nn.Dropout({p}) must raise ValueError when it is made"
    if len(outputs) != 3:
        return f"expected (values, x itself returned, p), got {len(outputs)} outputs"
    if not np.isclose(float(outputs[2]), p):
        return f"{what}: the module must keep p as .p"
    why = _check_dropout((shape, p, training, seed, bits), (outputs[0], outputs[1], None))
    return why and f"{what}: {why}"


def _dropout_all_cases(rng: np.random.Generator) -> list[Case]:
    return _dropout_cases(rng) + _dropout_module_cases(rng)


def _check_dropout_any(case: Case, outputs: tuple) -> str | None:
    return _check_dropout_module(case, outputs) if isinstance(case[0], str) else _check_dropout(case, outputs)


# ---- statistics of an initialiser's draw ---------------------------------------------------------------------------

def _raised(outputs: tuple) -> bool:
    return len(outputs) == 1 and outputs[0].size == 1 and int(outputs[0].reshape(-1)[0]) == 1


def _spread(w: np.ndarray, name: str, kind: str, std: float, mean: float = 0.0) -> str | None:
    """None when w looks drawn from `kind` ("uniform" on mean +- std sqrt 3, or "normal") with that mean and std: no
    value past a uniform's bound, the mean and std within what len(w) draws allow, and a normal's tails."""
    w = np.asarray(w, np.float64).reshape(-1)
    n = w.size
    if kind == "uniform" and np.abs(w - mean).max() > std * math.sqrt(3) * (1 + 1e-5):
        return (f"{name}: values up to {np.abs(w - mean).max():.4g} from {mean:g}, beyond the bound "
                f"{std * math.sqrt(3):.4g}")
    if n < 200:
        return None  # too few draws for the moments
    std_tol = 5 * (0.45 if kind == "uniform" else 0.71) / math.sqrt(n)  # five standard errors of the sample std
    if abs(w.mean() - mean) > 5 * std / math.sqrt(n) or abs(w.std() / std - 1) > std_tol:
        return f"{name}: mean {w.mean():.4g} and std {w.std():.4g}; expected mean {mean:g} and std {std:.4g}"
    if kind == "normal" and n >= 5000 and np.mean(np.abs(w - mean) > 2 * std) < 0.035:  # a normal: 4.6%, a uniform: 0
        return f"{name}: the values are not spread like a normal distribution"
    return None


# ---- xavier: fans, gains, Xavier ------------------------------------------------------------------------------------

def _fans_of(shape) -> tuple[int, int]:
    field = math.prod(shape[2:])
    return shape[1] * field, shape[0] * field


def _xavier_cases(rng: np.random.Generator) -> list[Case]:
    cases: list[Case] = [("fans", np.array(s)) for s in [(5, 3), (64, 3, 5, 5), (7, 2, 1, 4), (1, 1), (9,), ()]]
    cases += [("gain", name) for name in ["linear", "sigmoid", "tanh", "relu", "gelu", "leaky", "Tanh"]]
    for i, shape in enumerate([(300, 200), (64, 30, 5, 5), (2000, 20), (40, 1000)]):
        for kind in ("uniform", "normal"):
            cases.append(("xavier", np.array(shape), [1.0, 5 / 3, math.sqrt(2), 0.5][i], kind,
                          int(rng.integers(0, 10**6))))
    return cases + [("xavier", np.array((6,)), 1.0, "uniform", 0), ("xavier", np.array((6,)), 1.0, "normal", 0)]


GAIN_VALUES = {"linear": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3.0, "relu": math.sqrt(2.0), "gelu": math.sqrt(2.0)}


def _check_xavier(case: Case, outputs: tuple) -> str | None:
    what = case[0]
    if what == "fans":
        shape = tuple(int(s) for s in np.atleast_1d(case[1]))
        if len(shape) < 2:
            return None if _raised(outputs) else f"fans of a tensor of shape {shape} must raise ValueError"
        got = np.asarray(outputs[0]).reshape(-1).tolist() if len(outputs) == 1 else None
        return None if got == list(_fans_of(shape)) else \
            f"fans of shape {shape}: got {got}, expected (fan_in, fan_out) = {_fans_of(shape)}"
    if what == "gain":
        name, want = str(case[1]), GAIN_VALUES.get(str(case[1]))
        if len(outputs) != 2:
            return f"expected (gain, raised), got {len(outputs)} outputs"
        raised = int(outputs[1]) == 1
        if want is None:
            return None if raised else f"calculate_gain({name!r}) must raise ValueError (an unknown name)"
        if raised or not np.isclose(float(outputs[0]), want, rtol=1e-12):
            got = "it raised" if raised else f"got {float(outputs[0]):.6g}"
            return f"calculate_gain({name!r}) is {want:.6g}, {got}"
        return None
    _, shape, gain, kind, _seed = case
    shape = tuple(int(s) for s in np.atleast_1d(shape))
    name = f"xavier_{kind}_(shape {shape}, gain={gain:.4g})"
    if len(shape) < 2:
        return None if _raised(outputs) else f"xavier_{kind}_ of a tensor of shape {shape} must raise ValueError"
    if len(outputs) != 3:
        return f"expected (values, is t, reproducible), got {len(outputs)} outputs"
    w = np.asarray(outputs[0], np.float64)
    if w.shape != shape:
        return f"{name}: the tensor has shape {w.shape}"
    if not int(outputs[1]):
        return f"{name}: must fill t in place and return t itself"
    if not int(outputs[2]):
        return f"{name}: two draws after the same tg.manual_seed differ (draw from teenygrad's generator)"
    fan_in, fan_out = _fans_of(shape)
    return _spread(w, name, kind, gain * math.sqrt(2.0 / (fan_in + fan_out)))


# ---- linear --------------------------------------------------------------------------------------------------------

def _linear_cases(rng: np.random.Generator) -> list[Case]:
    cases: list[Case] = []
    for n_in, n_out, bias, bits in [(400, 300, 1, 32), (30, 2000, 1, 64), (2000, 25, 0, 32), (1, 1, 1, 64),
                                    (7, 3, 0, 64)]:
        cases.append(("init", n_in, n_out, bias, bits, int(rng.integers(0, 10**6))))
    cases += [("error", 0, 3), ("error", 4, 0)]
    for lead, n_in, n_out, bias in [((5,), 3, 4, 1), ((2, 3), 6, 2, 1), ((4,), 5, 3, 0), ((), 4, 2, 1), ((1,), 1, 1, 1),
                                    ((2, 1, 3), 3, 5, 0)]:
        x = rng.normal(size=lead + (n_in,))
        w, b = rng.normal(size=(n_out, n_in)), rng.normal(size=n_out) if bias else np.zeros(0)
        cases.append(("forward", x, w, b, bias, rng.normal(size=lead + (n_out,))))
    return cases + [("train", int(rng.choice(TRAINING_SEEDS)), TRAINING_STEPS)]


def _loss_linear(x, w, b, g) -> float:
    y = x @ w.T + (b if b.size else 0.0)
    return float((g * y).sum())


def _finite_differences(f, arrays: list[np.ndarray], h: float = 1e-5) -> list[np.ndarray]:
    """Central differences of the scalar f(*arrays) with respect to each array, in float64."""
    grads = []
    for k, a in enumerate(arrays):
        grad = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            plus, minus = [x.copy() for x in arrays], [x.copy() for x in arrays]
            plus[k][i] += h
            minus[k][i] -= h
            grad[i] = (f(*plus) - f(*minus)) / (2 * h)
        grads.append(grad)
    return grads


def _check_linear(case: Case, outputs: tuple) -> str | None:
    what = case[0]
    if what == "error":
        return None if _raised(outputs) else f"nn.Linear({case[1]}, {case[2]}) must raise ValueError"
    if what == "train":
        return _check_training(case[1:], outputs)
    if what == "init":
        _, n_in, n_out, bias, bits, _seed = case
        name = f"nn.Linear({n_in}, {n_out}, bias={bool(bias)})"
        if len(outputs) != 3:
            return f"expected (weight, bias, facts), got {len(outputs)} outputs"
        w, b, facts = np.asarray(outputs[0], np.float64), np.asarray(outputs[1], np.float64), outputs[2].reshape(-1)
        if facts.size != 6:
            return "expected six facts about the layer"
        if w.shape != (n_out, n_in):
            return f"{name}: weight of shape {w.shape}, expected (out_features, in_features) = {(n_out, n_in)}"
        if (int(facts[0]), int(facts[1])) != (n_in, n_out):
            return f"{name}: keep in_features and out_features (got {int(facts[0])}, {int(facts[1])})"
        if bias and (int(facts[2]) or b.shape != (n_out,)):
            return f"{name}: bias of shape {b.shape if not int(facts[2]) else None}, expected ({n_out},)"
        if not bias and not int(facts[2]):
            return f"{name}: without a bias, self.bias must be None"
        if not int(facts[3]):
            return f"{name}: the parameters must be leaf tensors that require grad (nn.parameter)"
        if int(facts[4]) != bits:
            return f"{name}, dtype float{bits}: the parameters are float{int(facts[4])}"
        if not int(facts[5]):
            return f"{name}: two layers made after the same tg.manual_seed differ (draw from teenygrad's generator)"
        std = 1 / math.sqrt(3 * n_in)  # uniform(-1/sqrt(in), 1/sqrt(in))
        return _spread(w, f"{name}'s weight", "uniform", std) or (_spread(b, f"{name}'s bias", "uniform", std)
                                                                  if bias else None)
    _, x, w, b, bias, g = case
    name = f"nn.Linear({w.shape[1]}, {w.shape[0]}, bias={bool(bias)}) on x of shape {np.shape(x)}"
    want = [x @ w.T + (b if bias else 0.0), *_finite_differences(_loss_linear, [x, w, b, g])[:3]]
    if len(outputs) != 5:
        return f"expected (y, dx, dW, db, one op), got {len(outputs)} outputs"
    if int(outputs[4]) != 1:
        return f"{name}: forward must be one op, tg.functional.linear (its node's op is \"linear\")"
    for label, got, expected in zip(["the output", "dL/dx", "dL/dW", "dL/db"], outputs, want):
        got = np.asarray(got, np.float64)
        if label == "dL/db" and not bias:
            continue
        if got.shape != expected.shape:
            return f"{name}: {label} of shape {got.shape}, expected {expected.shape}"
        if not np.allclose(got, expected, rtol=1e-6, atol=1e-7):
            err = np.max(np.abs(got - expected))
            return f"{name}: {label} is wrong (largest error {err:.3g}, against finite differences)"
    return None


# ---- embedding -------------------------------------------------------------------------------------------------------

def _embedding_cases(rng: np.random.Generator) -> list[Case]:
    cases: list[Case] = [("init", num, dim, bits, int(rng.integers(0, 10**6)))
                         for num, dim, bits in [(1000, 64, 32), (50, 300, 64), (1, 1, 32)]]
    cases += [("error", 0, 4), ("error", 5, 0)]
    for shape, num, dim in [((7,), 5, 3), ((3, 4), 10, 2), ((2, 1, 5), 4, 6), ((), 3, 2), ((6,), 1, 4)]:
        ids = rng.integers(0, num, size=shape).astype(np.int64)
        cases.append(("forward", ids, rng.normal(size=(num, dim)), rng.normal(size=shape + (dim,))))
    return cases


def _check_embedding(case: Case, outputs: tuple) -> str | None:
    what = case[0]
    if what == "error":
        return None if _raised(outputs) else f"nn.Embedding({case[1]}, {case[2]}) must raise ValueError"
    if what == "init":
        _, num, dim, bits, _seed = case
        name = f"nn.Embedding({num}, {dim})"
        if len(outputs) != 2 or outputs[1].size != 5:
            return "expected (weight, five facts)"
        w, facts = np.asarray(outputs[0], np.float64), outputs[1].reshape(-1)
        if w.shape != (num, dim):
            return f"{name}: weight of shape {w.shape}, expected (num_embeddings, embedding_dim) = {(num, dim)}"
        if (int(facts[0]), int(facts[1])) != (num, dim):
            return f"{name}: keep num_embeddings and embedding_dim"
        if not int(facts[2]):
            return f"{name}: the weight must be a leaf tensor that requires grad (nn.parameter)"
        if int(facts[3]) != bits:
            return f"{name}, dtype float{bits}: the weight is float{int(facts[3])}"
        if not int(facts[4]):
            return f"{name}: two tables made after the same tg.manual_seed differ (draw from teenygrad's generator)"
        return _spread(w, f"{name}'s weight", "normal", 1.0)
    _, ids, table, g = case
    name = f"nn.Embedding({table.shape[0]}, {table.shape[1]}) on ids of shape {np.shape(ids)}"
    grad = np.zeros_like(table)
    np.add.at(grad, np.asarray(ids).reshape(-1), np.asarray(g).reshape(-1, table.shape[1]))
    why = compare(outputs, (table[ids], grad), Part(cases=lambda rng: [], rtol=1e-12, atol=1e-12))
    return why and f"{name} (its rows, then the table's gradient, which adds the rows of an id used twice): {why}"


# ---- layer_norm and rms_norm ----------------------------------------------------------------------------------------

def _norm_cases(rng: np.random.Generator, with_bias: bool) -> list[Case]:
    cases: list[Case] = [("init", dim, eps, bias if with_bias else 0, bits) for dim, eps, bias, bits in
                         [(16, 1e-5, 1, 32), (7, 1e-3, 0, 64), (1, 0.1, 1, 32)]]
    cases += [("error", 0, 1e-5), ("error", 4, 0.0), ("error", 4, -1e-5)]
    for lead, dim, eps, bias in [((5,), 8, 1e-5, 1), ((2, 3), 4, 1e-2, 0), ((), 6, 1e-5, 1), ((3,), 1, 1e-5, 1)]:
        x = rng.normal(size=lead + (dim,)) * 3 + 1
        b = rng.normal(size=dim) if bias else np.zeros(dim)
        cases.append(("forward", x, rng.normal(size=dim), b, bias if with_bias else 0, eps))
    return cases


def _layer_norm_ref(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


def _rms_norm_ref(x, w, b, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _check_norm(case: Case, outputs: tuple, layer: str, with_bias: bool) -> str | None:
    what = case[0]
    if what == "error":
        return None if _raised(outputs) else f"nn.{layer}({case[1]}, eps={case[2]}) must raise ValueError"
    if what == "init":
        _, dim, eps, bias, bits = case
        name = f"nn.{layer}({dim}, eps={eps}" + (f", bias={bool(bias)})" if with_bias else ")")
        if len(outputs) != 3 or outputs[2].size != 5:
            return "expected (weight, bias, five facts)"
        w, b, facts = np.asarray(outputs[0], np.float64), np.asarray(outputs[1], np.float64), outputs[2].reshape(-1)
        if w.shape != (dim,) or not np.all(w == 1):
            return f"{name}: weight must be ones of shape ({dim},)"
        if int(facts[0]) != dim or not np.isclose(float(facts[1]), eps, rtol=1e-12):
            return f"{name}: keep dim and eps"
        if with_bias and bias and (int(facts[2]) or b.shape != (dim,) or np.any(b != 0)):
            return f"{name}: bias must be zeros of shape ({dim},)"
        if (not with_bias or not bias) and not int(facts[2]):
            return f"{name}: " + ("without a bias, self.bias must be None" if with_bias else "an RMSNorm has no bias")
        if not int(facts[3]):
            return f"{name}: the parameters must be leaf tensors that require grad (nn.parameter)"
        if int(facts[4]) != bits:
            return f"{name}, dtype float{bits}: the parameters are float{int(facts[4])}"
        return None
    _, x, w, b, bias, eps = case
    want = (_layer_norm_ref if with_bias else _rms_norm_ref)(x, w, b, eps)
    why = compare(outputs, (want,), Part(cases=lambda rng: [], rtol=1e-9, atol=1e-10))
    return why and f"nn.{layer} on x of shape {np.shape(x)} (eps={eps}): {why}"


PARTS = {
    "modules": Part(cases=_modules_cases, check=_check_modules),
    "kaiming": Part(cases=_kaiming_cases, check=_check_kaiming),
    "sgd_update": Part(cases=_sgd_cases, check=_check_sgd),
    "adam_update": Part(cases=_adam_cases, check=_check_adam),
    "lr_at": Part(cases=_lr_cases, check=_check_lr),
    "clip_grad_norm": Part(cases=_clip_cases, check=_check_clip),
    "batches": Part(cases=_batches_cases, check=_check_batches),
    "optimizer": Part(cases=_optimizer_cases, check=_check_optimizer),
    "dropout": Part(cases=_dropout_all_cases, check=_check_dropout_any),
    "xavier": Part(cases=_xavier_cases, check=_check_xavier),
    "linear": Part(cases=_linear_cases, check=_check_linear),
    "embedding": Part(cases=_embedding_cases, check=_check_embedding),
    "layer_norm": Part(cases=lambda rng: _norm_cases(rng, True),
                       check=lambda case, outputs: _check_norm(case, outputs, "LayerNorm", True)),
    "rms_norm": Part(cases=lambda rng: _norm_cases(rng, False),
                     check=lambda case, outputs: _check_norm(case, outputs, "RMSNorm", False)),
}
