"""Judge for assignment 09-gpt: attention and a GPT block in teenygrad (exercises/09-gpt.ipynb).

The learner writes causal self-attention (`causal_attention`), the backward rule of layer normalisation
(`layer_norm_backward`) and one pre-norm GPT block (`gpt_block`). The hidden tests call them on the inputs
below (as float64 teenygrad tensors) and report the results; this judge computes the same in numpy float64.

Value cases
  causal_attention     (q, k, v)               q (..., Tq, hs), k and v (..., Tk, hs), Tk >= Tq
                                                -> softmax(q k^T / sqrt(hs) + causal mask) v
  layer_norm_backward  (x, w, b, g)            y = F.layer_norm(x, w, b), y.backward(g) with the learner's
                                                rule -> (dx, dw, db)
  gpt_block            (x, 12 weights, n_head)  the weights in the order of BLOCK_KEYS -> the block's output
Training cases (two arguments): (seed, steps). The hidden tests train a one-layer GPT on the names for
`steps` steps with the learner's part in charge (its attention, its rule, or its block) and report the loss
of every step. The run must start near ln 27 and its last LAST steps must average at most TRAIN_HIGH.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judges import Case, Part, _compare

BLOCK_KEYS = ["ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b", "ln2_w", "ln2_b", "fc_w", "fc_b", "fc2_w",
              "fc2_b"]
TRAIN_STEPS, LAST = 150, 20
TRAIN_HIGH = 2.75                      # a correct run ends near 2.5 (2.47 to 2.53 over seeds 0 to 3)
START_LOW, START_HIGH = 3.1, 3.6       # ln 27 = 3.30: a fresh model guesses uniformly
EPS = 1e-5


# ---- numpy references -----------------------------------------------------------------------------------------

def attention_np(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    tq, hs, tk = q.shape[-2], q.shape[-1], k.shape[-2]
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(hs)
    allowed = np.arange(tk)[None, :] <= np.arange(tq)[:, None] + (tk - tq)
    scores = np.where(allowed, scores, -np.inf)
    scores = scores - scores.max(-1, keepdims=True)
    p = np.exp(scores)
    return (p / p.sum(-1, keepdims=True)) @ v


def layer_norm_np(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * w + b


def layer_norm_backward_np(x, w, b, g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of sum(g * layer_norm(x, w, b)), derived by hand (tests check them by finite differences)."""
    C = x.shape[-1]
    x2, g2 = x.reshape(-1, C), g.reshape(-1, C)
    mu = x2.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x2 - mu) ** 2).mean(-1, keepdims=True) + EPS)
    xhat = (x2 - mu) * rstd
    dxhat = g2 * w
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx.reshape(x.shape), (g2 * xhat).sum(0), g2.sum(0)


def gelu_np(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt_block_np(x, *args) -> np.ndarray:
    *weights, n_head = args
    p = dict(zip(BLOCK_KEYS, weights))
    n_head = int(n_head)
    B, T, C = x.shape
    hs = C // n_head
    qkv = layer_norm_np(x, p["ln1_w"], p["ln1_b"]) @ p["qkv_w"].T + p["qkv_b"]
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B, T, n_head, hs).transpose(0, 2, 1, 3) for i in range(3))
    y = attention_np(q, k, v).transpose(0, 2, 1, 3).reshape(B, T, C)
    x = x + y @ p["proj_w"].T + p["proj_b"]
    h = gelu_np(layer_norm_np(x, p["ln2_w"], p["ln2_b"]) @ p["fc_w"].T + p["fc_b"])
    return x + h @ p["fc2_w"].T + p["fc2_b"]


# ---- cases ------------------------------------------------------------------------------------------------------

def _training_case(rng: np.random.Generator) -> Case:
    return int(rng.integers(0, 1000)), TRAIN_STEPS


_ATTENTION_SHAPES = [  # (q shape, Tk): 2-D, batched, (B, heads, T, hs), one position, hs = 1, more keys than queries
    ((5, 4), 5), ((2, 7, 3), 7), ((2, 3, 6, 4), 6), ((1, 1, 3), 1), ((3, 4, 1), 4), ((2, 3, 4), 9),
    ((2, 2, 1, 5), 6), ((16, 8), 16),
]


def _attention_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for qshape, tk in _ATTENTION_SHAPES:
        kshape = (*qshape[:-2], tk, qshape[-1])
        cases.append((rng.normal(size=qshape), rng.normal(size=kshape), rng.normal(size=kshape)))
    return cases + [_training_case(rng)]


_LN_SHAPES = [(1, 4), (5, 8), (2, 3, 6), (4, 1), (2, 2, 2, 5), (7, 16)]


def _layer_norm_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for shape in _LN_SHAPES:
        C = shape[-1]
        x = rng.normal(size=shape) * rng.uniform(0.5, 3.0) + rng.normal()
        cases.append((x, rng.normal(size=C), rng.normal(size=C), rng.normal(size=shape)))
    return cases + [_training_case(rng)]


_BLOCK_SHAPES = [(1, 1, 4, 1), (2, 5, 8, 2), (3, 7, 12, 3), (1, 6, 16, 4), (2, 3, 6, 1)]  # (B, T, C, n_head)


def _block_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for B, T, C, nh in _BLOCK_SHAPES:
        shapes = [(C,), (C,), (3 * C, C), (3 * C,), (C, C), (C,), (C,), (C,), (4 * C, C), (4 * C,), (C, 4 * C), (C,)]
        weights = [rng.normal(size=s) / (math.sqrt(s[1]) if len(s) == 2 else 1.0) for s in shapes]
        cases.append((rng.normal(size=(B, T, C)), *weights, nh))
    return cases + [_training_case(rng)]


# ---- checks -----------------------------------------------------------------------------------------------------

def _check_training(case: Case, got: tuple) -> str | None:
    losses = np.asarray(got[0], dtype=np.float64).reshape(-1)
    if losses.size != case[1]:
        return f"reported {losses.size} losses for a run of {case[1]} steps"
    if not np.all(np.isfinite(losses)):
        return "the training loss became nan or infinite"
    end = losses[-LAST:].mean()
    if not START_LOW <= losses[0] <= START_HIGH:
        return f"the training run starts at loss {losses[0]:.3f}, expected about ln 27 = 3.30"
    if end > TRAIN_HIGH:
        return f"in a training run the loss only fell to {end:.3f} (expected at most {TRAIN_HIGH})"
    return None


def _checker(reference, part: Part):
    def check(case: Case, got: tuple) -> str | None:
        if len(case) == 2:
            return _check_training(case, got)
        want = reference(*case)
        return _compare(got, want if isinstance(want, tuple) else (want,), part)
    return check


PARTS = {
    "causal_attention": Part(cases=_attention_cases, rtol=1e-7, atol=1e-9),
    "layer_norm_backward": Part(cases=_layer_norm_cases, rtol=1e-6, atol=1e-8),
    "gpt_block": Part(cases=_block_cases, rtol=1e-7, atol=1e-9),
}
for _name, _ref in [("causal_attention", attention_np), ("layer_norm_backward", layer_norm_backward_np),
                    ("gpt_block", gpt_block_np)]:
    PARTS[_name].check = _checker(_ref, PARTS[_name])
