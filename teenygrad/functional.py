"""The neural-network functions `teenygrad.nn` layers call, as plain functions on Tensors (chapters 7 and 9;
`import teenygrad.functional as F`).

Each one is differentiable: it either composes Tensor ops (autograd records them) or is one fused op with
its own kernel and backward rule, from `teenygrad.ops.fused` (chapter 9 shows what each fusion buys:
`F.unfused` swaps the composed versions in).
"""
from __future__ import annotations

from typing import ContextManager

import numpy as np

from teenygrad import tracing
from teenygrad._swap import swapped
from teenygrad.edition import exercise
from teenygrad.kernels.elementwise import GELU_A, GELU_K
from teenygrad.ops.fused import cached_attention, causal_self_attention, layer_norm, linear, rms_norm
from teenygrad.tensor import Tensor, rand

__all__ = ["linear", "embedding", "layer_norm", "rms_norm", "dropout", "causal_attention", "causal_self_attention",
           "cached_attention", "cross_entropy", "gelu", "layer_norm_unfused", "rms_norm_unfused"]


@exercise("07-neural-nets", "embedding")
def embedding(index: Tensor, weight: Tensor) -> Tensor:
    """Rows of `weight` (num, dim) picked by the integer `index` (any shape) -> (*index.shape, dim), through
    index_select (whose backward adds a row's gradients when an id comes twice)."""
    flat = index.reshape(-1)
    return weight.index_select(0, flat).reshape(*index.shape, weight.shape[1])


def layer_norm_unfused(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None,
                       eps: float = 1e-5) -> Tensor:
    """Composed from Tensor ops (the reference `layer_norm` is checked against). Normalise the last dim to
    mean 0, variance 1, then scale and shift:
    y = (x - mean) / sqrt(var + eps) * weight + bias   (var is the biased variance, as in PyTorch)."""
    mu = x.mean(-1, keepdim=True)
    xc = x - mu
    y = xc / ((xc * xc).mean(-1, keepdim=True) + eps).sqrt()
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def rms_norm_unfused(x: Tensor, weight: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Composed from Tensor ops. y = x / sqrt(mean(x^2) + eps) * weight, over the last dim (no centring, no bias)."""
    y = x / ((x * x).mean(-1, keepdim=True) + eps).sqrt()
    return y if weight is None else y * weight


@exercise("07-neural-nets", "dropout")
def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1-p), so the expected value is
    unchanged; the identity when not training or p == 0."""
    if not 0 <= p < 1:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}")
    if not training or p == 0:
        return x
    keep = (rand(*x.shape, dtype=x.dtype).to(x.device) >= p).to(x.dtype)  # drawn on the CPU: one stream everywhere
    return x * keep * (1.0 / (1.0 - p))


_MASKS: dict[tuple[int, int, str], Tensor] = {}


def _causal_mask(tq: int, tk: int, dtype: np.dtype) -> Tensor:
    """(tq, tk) additive mask: 0 where query i may look at key j (j <= i + tk - tq), -inf after it."""
    if tracing.active:  # inside teenygrad.compile's trace: built from aranges, not cached
        return tracing.hooks.causal_mask(tq, tk, dtype)
    key = (tq, tk, str(dtype))
    if key not in _MASKS:
        m = np.triu(np.full((tq, tk), -np.inf), k=tk - tq + 1)
        _MASKS[key] = Tensor(m, dtype=dtype)
    return _MASKS[key]


def causal_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """softmax(q k^T / sqrt(hs) + causal mask) v.   q (..., Tq, hs), k and v (..., Tk, hs) -> (..., Tq, hs).

    With Tk > Tq (a KV cache), the queries are the last Tq positions of the Tk keys. Chapter 9 writes it out
    (its `attention`); exercise 9's cached_attention may call it."""
    tq, hs, tk = q.shape[-2], q.shape[-1], k.shape[-2]
    att = (q @ k.transpose(-1, -2)) * (1.0 / float(np.sqrt(hs)))  # (..., Tq, Tk)
    att = (att + _causal_mask(tq, tk, att.dtype)).softmax(-1)
    return att @ v


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean of -log softmax(logits)[target] over rows; logits (N, C), targets (N,) int64. Fused and stable."""
    return logits.cross_entropy(targets)


def gelu(x: Tensor) -> Tensor:
    """GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): the op `Tensor.gelu`, one
    kernel each way (vectorised for float32)."""
    return x.gelu()


# ---- the composed versions, to measure what each fusion buys (chapter 9) ------------------------------

def linear_unfused(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    y = x @ weight.T                                  # three nodes: transpose, matmul, broadcast add
    return y if bias is None else y + bias


def causal_self_attention_unfused(qkv: Tensor, n_head: int) -> Tensor:
    B, T, C3 = qkv.shape
    C = C3 // 3
    q, k, v = (qkv[:, :, i * C:(i + 1) * C].reshape(B, T, n_head, C // n_head).transpose(1, 2) for i in range(3))
    return causal_attention(q, k, v).transpose(1, 2).reshape(B, T, C)  # heads back side by side


def gelu_unfused(x: Tensor) -> Tensor:
    return 0.5 * x * (1.0 + (GELU_K * (x + GELU_A * x * x * x)).tanh())  # seven elementwise ops each way


FUSIONS = {"linear": linear_unfused, "layer_norm": layer_norm_unfused, "rms_norm": rms_norm_unfused,
           "causal_self_attention": causal_self_attention_unfused, "gelu": gelu_unfused}


def unfused(*names: str) -> ContextManager[None]:
    """Run a block with some fused ops replaced by their composed versions (all of them by default):
    `with F.unfused("gelu"): model(x)`. Models call `F.<name>` at run time, so they pick the swap up."""
    unknown = [n for n in names if n not in FUSIONS]
    if unknown:
        raise KeyError(f"unfused: unknown fused op(s) {unknown}; known: {sorted(FUSIONS)}")
    return swapped(globals(), "fused op", **{n: FUSIONS[n] for n in (names or FUSIONS)})


