"""Fused kernels for the transformer's hot paths (chapter 9): layer norm, RMS norm and causal self-attention,
each forward and backward in one pass over the data.

Composed from Tensor ops, a layer norm is ~8 kernels and as many full-size temporaries (mean, x - mean,
its square, ...), and attention is two batched matmuls, a mask, a softmax and four copies to move heads
around. Each kernel here reads its inputs once and writes its outputs once; the backward kernels use
what the forward saved (per-row mean and 1/std; the attention probabilities).

Shapes: norms work on rows, x (R, C) contiguous. Attention reads a (B, T, 3C) `qkv` buffer (the
q, k, v projections side by side, heads of size hs = C / nh inside each) and writes y (B, T, C): head
h of token t lands at y[b, t, h*hs:(h+1)*hs], which is already the layout the next linear layer wants.

Every kernel comes twice: a serial body that does rows (or heads) lo..hi, and a parallel driver that
splits them among threads. Waking threads costs microseconds, and much more on a busy machine, so small
tensors (a one-name batch) run the body directly. The launchers at the end pick (`parallel_pays`), and they
are what the kernel table (`teenygrad.kernels.KERNELS`) holds:

    add_bias(y, b)                                  y (R, C) += b (C,), in place: a linear layer's bias
    layer_norm(x, w, b, eps, y, mean, rstd)         x, y (R, C); w, b (C,); mean, rstd (R,) written
    rms_norm(x, w, eps, y, rstd)                    x, y (R, C); w (C,); rstd (R,) written
    attention(qkv, nh, y, att)                      qkv (B, T, 3C) -> y (B, T, C), att (B, nh, T, T)
Layer norm's and RMS norm's backward, attention's backward and attention against a KV cache are pieces of
exercise 9: their kernels live inside `teenygrad.ops.fused.layer_norm_backward`, `rms_norm_backward`,
`attention_backward` and `cached_attention`.
All arrays are C-contiguous numpy arrays of one float dtype.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad.kernels.jit import CHUNKS, JIT_ENABLED, kernel, parallel_pays, prange
from teenygrad.kernels.matmul import matmul_tiled_into, tiled_buffers

if JIT_ENABLED:
    from llvmlite import ir as _llvm_ir
    from numba import types as _types
    from numba.extending import intrinsic as _intrinsic
    from numba.extending import overload as _overload

fast = kernel(fastmath=True, numpy_errors=True)               # serial bodies: x / 0 -> inf, so loops vectorise
parallel = kernel(parallel=True, fastmath=True, numpy_errors=True)


# ---- linear: the bias add ------------------------------------------------------------------------------

@fast
def add_bias_serial(y, b, lo, hi):
    """y[r, :] += b for rows lo..hi of y (R, C): the bias of a linear layer, added in place."""
    for r in range(lo, hi):
        for c in range(y.shape[1]):
            y[r, c] += b[c]


@parallel
def add_bias_parallel(y, b):
    R = y.shape[0]
    for k in prange(CHUNKS):
        add_bias_serial(y, b, k * R // CHUNKS, (k + 1) * R // CHUNKS)


# ---- layer norm: y = (x - mean) / sqrt(var + eps) * w + b ----------------------------------------------

@fast
def layer_norm_forward_serial(x, w, b, eps, y, mean, rstd, lo, hi):
    """Rows lo..hi of x, y (R, C); w, b (C,); writes y and each row's mean and rstd = 1 / sqrt(var + eps)."""
    C = x.shape[1]
    for r in range(lo, hi):
        m = 0.0
        for c in range(C):
            m += x[r, c]
        m /= C
        v = 0.0
        for c in range(C):
            d = x[r, c] - m
            v += d * d
        s = 1.0 / math.sqrt(v / C + eps)
        for c in range(C):
            y[r, c] = (x[r, c] - m) * s * w[c] + b[c]
        mean[r], rstd[r] = m, s


@parallel
def layer_norm_forward_parallel(x, w, b, eps, y, mean, rstd):
    R = x.shape[0]
    for k in prange(CHUNKS):
        layer_norm_forward_serial(x, w, b, eps, y, mean, rstd, k * R // CHUNKS, (k + 1) * R // CHUNKS)


# ---- RMS norm: y = x / sqrt(mean(x^2) + eps) * w -------------------------------------------------------

@fast
def rms_norm_forward_serial(x, w, eps, y, rstd, lo, hi):
    C = x.shape[1]
    for r in range(lo, hi):
        ss = 0.0
        for c in range(C):
            ss += x[r, c] * x[r, c]
        s = 1.0 / math.sqrt(ss / C + eps)
        for c in range(C):
            y[r, c] = x[r, c] * s * w[c]
        rstd[r] = s


@parallel
def rms_norm_forward_parallel(x, w, eps, y, rstd):
    R = x.shape[0]
    for k in prange(CHUNKS):
        rms_norm_forward_serial(x, w, eps, y, rstd, k * R // CHUNKS, (k + 1) * R // CHUNKS)


# ---- exp in float32, in a form the compiler can vectorise ------------------------------------------------
# libm's exp is a function call per element, which stops a loop from becoming SIMD instructions. exp32
# is the classic Cephes expf, written as plain arithmetic: e^x = 2^k e^r with k = round(x / ln 2) and
# |r| <= ln(2)/2, e^r by a degree-7 polynomial, and 2^k built directly from its bits (exponent field k + 127).

if JIT_ENABLED:
    @_intrinsic
    def _float32_from_bits(typingctx, i):
        """The float32 whose bit pattern is the integer i (its low 32 bits): a reinterpretation, no conversion."""
        if not isinstance(i, _types.Integer):
            return None

        def codegen(context, builder, signature, args):
            bits = builder.trunc(args[0], _llvm_ir.IntType(32)) if i.bitwidth > 32 else args[0]
            return builder.bitcast(bits, _llvm_ir.FloatType())
        return _types.float32(i), codegen
else:
    def _float32_from_bits(i):
        return np.int32(i).view(np.float32)


@fast
def exp32(x):
    """e^x for float32 x, relative error below 2e-7; x below -87 (where e^x leaves float32's normal range)
    gives e^-87."""
    x = max(x, np.float32(-87.0))
    k = np.floor(x * np.float32(1.4426950408889634) + np.float32(0.5))        # x / ln 2, rounded (a float32:
    # math.floor would give an int64, and the arithmetic below would silently run in float64, half as wide)
    r = x - k * np.float32(0.693359375) + k * np.float32(2.12194440e-4)        # x - k ln 2, ln 2 in two parts
    p = np.float32(1.9875691500e-4)
    p = p * r + np.float32(1.3981999507e-3)
    p = p * r + np.float32(8.3334519073e-3)
    p = p * r + np.float32(4.1665795894e-2)
    p = p * r + np.float32(1.6666665459e-1)
    p = p * r + np.float32(5.0000001201e-1)
    return (p * r * r + r + np.float32(1.0)) * _float32_from_bits((int(k) + 127) << 23)


def exp_fast(x):
    """e^x: `exp32` for a float32 x (inside kernels the choice is made at compile time), math.exp otherwise."""
    return exp32(x) if isinstance(x, np.float32) else math.exp(x)


if JIT_ENABLED:
    @_overload(exp_fast, jit_options={"fastmath": True, "error_model": "numpy"})
    def _exp_fast(x):
        return (lambda x: exp32(x)) if x == _types.float32 else (lambda x: math.exp(x))


# ---- causal self-attention -------------------------------------------------------------------------
# Each (batch, head) pair is independent, so pairs are shared among threads. Per pair, attention is two
# small matrix products around a softmax (four products around its backward), so it runs on chapter 3's
# register-tiled matmul (`matmul_tiled_into`, its scratch space allocated once per range of pairs),
# which reads the heads' columns of qkv where they lie (strided views, no copies) and writes the output
# straight into the head's columns of y. The causal mask makes half of each (T, T) matrix zero or unneeded;
# the products skip that half micro-tile by micro-tile (matmul_tiled_into's `causal` modes).

@fast
def softmax_causal(s, scale, p):
    """p[i, j] = softmax_j(scale * s[i, j]) over the visible keys j <= i, and 0 for j > i.
    s, p (T, T). Shifted by the row's maximum so exp never overflows."""
    T = s.shape[0]
    typed = np.empty(1, s.dtype)  # the scale in the data's dtype: float32 data keeps float32 arithmetic
    typed[0] = scale
    scale = typed[0]
    for i in range(T):
        row, out, n = s[i], p[i], i + 1  # keys 0..i are visible
        mx = row[0]
        for j in range(n):
            mx = max(mx, row[j])
        tot = scale * 0
        for j in range(n):
            e = exp_fast((row[j] - mx) * scale)
            out[j] = e
            tot += e
        inv = 1 / tot
        for j in range(n):
            out[j] *= inv
        for j in range(n, T):
            out[j] = 0


@fast
def attention_forward_serial(qkv, nh, y, att, lo, hi):
    """Pairs bh = b * nh + h in lo..hi. qkv (B, T, 3C) -> y (B, T, C), att (B, nh, T, T), the
    probabilities (0 above the diagonal). For one pair: S = q k^T, P = softmax(S / sqrt(hs)) over
    j <= i, y = P v."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // nh
    s = np.empty((T, T), qkv.dtype)
    bp, edge = tiled_buffers(s, max(T, hs), max(T, hs))  # scratch for all the small products below
    for bh in range(lo, hi):
        b, h = bh // nh, bh % nh
        x = qkv[b]                                                       # (T, 3C)
        q, k = x[:, h * hs:(h + 1) * hs], x[:, C + h * hs:C + (h + 1) * hs]
        v = x[:, 2 * C + h * hs:2 * C + (h + 1) * hs]
        matmul_tiled_into(q, k.T, s, bp, edge, 1)                        # S = q k^T      (T, T)
        softmax_causal(s, 1.0 / math.sqrt(hs), att[b, h])                # P              (T, T)
        matmul_tiled_into(att[b, h], v, y[b, :, h * hs:(h + 1) * hs], bp, edge, 2)  # y_h = P v  (T, hs)


@parallel
def attention_forward_parallel(qkv, nh, y, att):
    pairs = qkv.shape[0] * nh
    for k in prange(CHUNKS):
        attention_forward_serial(qkv, nh, y, att, k * pairs // CHUNKS, (k + 1) * pairs // CHUNKS)


# ---- the launchers: serial body or parallel driver, by the size of the call ---------------------------------

def add_bias(y, b):
    add_bias_parallel(y, b) if parallel_pays(y.size) else add_bias_serial(y, b, 0, y.shape[0])


def layer_norm(x, w, b, eps, y, mean, rstd):
    if parallel_pays(x.size):
        layer_norm_forward_parallel(x, w, b, eps, y, mean, rstd)
    else:
        layer_norm_forward_serial(x, w, b, eps, y, mean, rstd, 0, x.shape[0])


def rms_norm(x, w, eps, y, rstd):
    if parallel_pays(x.size):
        rms_norm_forward_parallel(x, w, eps, y, rstd)
    else:
        rms_norm_forward_serial(x, w, eps, y, rstd, 0, x.shape[0])


def attention(qkv, nh, y, att):
    B, T, C3 = qkv.shape  # work: the multiply-adds of q k^T under the causal mask, B * T * T/2 * C
    if parallel_pays(B * T * T * C3 // 6):
        attention_forward_parallel(qkv, nh, y, att)
    else:
        attention_forward_serial(qkv, nh, y, att, 0, B * nh)


KERNELS = {"add_bias": add_bias, "layer_norm": layer_norm,
           "rms_norm": rms_norm, "attention": attention}
