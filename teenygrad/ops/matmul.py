"""Matrix products (chapters 2, 3 and 6) with numpy's rules, and their gradient: da = g b^T, db = a^T g.

The kernels (`teenygrad.kernels.matmul`, chapter 3) take numpy arrays: (M, K) @ (K, N) into a preallocated
(M, N), or a batch of them. This launcher folds batch dims into rows where it can (one big product beats many
small ones) and hands transposed or sliced operands over as strided views, which teenygrad's kernel packs as
it reads them. The gradient rule, `matmul_backward`, is a piece of exercise 6 (part "matmul_rules").
"""
from __future__ import annotations

import numpy as np

from teenygrad import autograd, devices, tracing
from teenygrad.edition import exercise
from teenygrad.kernels import DEFAULTS, KERNELS, on
from teenygrad.kernels.layout import broadcast_shapes, prod
from teenygrad.ops.buffers import array, cast, contiguous, detached, new, result_dtype
from teenygrad.ops.movement import unbroadcast
from teenygrad.tensor import Tensor, float32, int64


def _matrix(x: Tensor) -> np.ndarray:
    """numpy view of a 2-D tensor with its own strides (transposed, sliced, expanded): no copy. teenygrad's
    matmul kernels pack their operands into blocks anyway, so they can read any layout. A kernel swapped in
    with `kernels.use(matmul=...)` gets contiguous arrays, as documented; so does a tensor with a negative
    stride (numpy views must start at their lowest address here). On the GPU, contiguous, or in float32 a transpose
    of a contiguous matrix as its storage (`devices.Transposed`: the top rung of the SGEMM ladder reads it in place)."""
    if x.is_contiguous():
        return array(x)
    if x.device != "cpu":  # the GPU's kernels take contiguous arrays: another view is copied
        if x.ndim == 2 and x.dtype == float32 and x.strides == (1, x.shape[0]):  # x = y.T for a contiguous y
            return devices.Transposed(x._buf[x.offset:x.offset + x.size].reshape(x.shape[1], x.shape[0]))
        return array(contiguous(x))
    if min(x.strides) < 0 or KERNELS["matmul"] is not DEFAULTS["matmul"]:
        return array(contiguous(x))
    item = x._buf.itemsize
    return np.ndarray(x.shape, x.dtype, buffer=x._buf, offset=x.offset * item, strides=[s * item for s in x.strides])


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with numpy's rules: (..., M, K) @ (..., K, N) -> (..., M, N), batch dims broadcast;
    a 1-D left operand is a row vector, a 1-D right operand a column vector (that dim is then dropped)."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.matmul(a, b)
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul: both operands must be Tensors")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape}: operands must have at least 1 dimension")
    device = devices.same("matmul", a, b)
    a_in, b_in, a, b = a, b, detached(a), detached(b)
    a_vec, b_vec = a.ndim == 1, b.ndim == 1
    if a_vec:
        a = a.reshape(1, a.shape[0])
    if b_vec:
        b = b.reshape(b.shape[0], 1)
    (M, K), (K2, N) = a.shape[-2:], b.shape[-2:]
    if K != K2:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not align ({K} != {K2})")
    dtype = result_dtype(a.dtype, b.dtype)
    if dtype == int64:
        dtype = float32
    if b.ndim == 2:  # (..., M, K) @ (K, N): fold the batch into the rows, one 2-D matmul
        out = _rows_times(a, b, dtype, device)
    else:
        try:
            batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], "matmul")
        except ValueError:
            raise ValueError(f"matmul: batch dimensions of shapes {a.shape} and {b.shape} do not broadcast") from None
        B = prod(batch)
        a3 = contiguous(a.expand(*batch, M, K), dtype).reshape(B, M, K)
        b3 = contiguous(b.expand(*batch, K, N), dtype).reshape(B, K, N)
        out = new(batch + (M, N), dtype, device)
        if out.size:
            on(device)["matmul_batched"](array(a3), array(b3), array(out.reshape(B, M, N)))
    if a_vec:
        out = out.reshape(*out.shape[:-2], N)
    if b_vec:
        out = out.reshape(*out.shape[:-1])
    if a_in._requires_grad or b_in._requires_grad:
        autograd.record("matmul", out, (a_in, b_in), a=a_in, b=b_in)
    return out


def _rows_times(a: Tensor, b: Tensor, dtype: object, device: str, bias: Tensor | None = None) -> Tensor:
    """a (..., K) @ b (K, N) (+ bias (N,) on every row) -> (..., N) of `dtype`, a's leading dims folded into the rows
    of one 2-D product (a view when they fold). Transposed operands (x @ w.T, a.T @ g) go in as strided views."""
    K, N = b.shape
    rows = prod(a.shape[:-1])
    out = new(a.shape[:-1] + (N,), dtype, device)
    if out.size:
        a2, b2, out2 = _matrix(cast(a, dtype).reshape(rows, K)), _matrix(cast(b, dtype)), array(out.reshape(rows, N))
        if bias is None:
            on(device)["matmul"](a2, b2, out2)
        else:
            on(device)["matmul_bias"](a2, b2, array(contiguous(bias, dtype)), out2)
    return out


def matmul_bias(a: Tensor, b: Tensor, bias: Tensor) -> Tensor:
    """a @ b + bias for a (..., K), b (K, N) and bias (N,): a linear layer's forward, one kernel of the device's table,
    `matmul_bias` (on a GPU one launch: the bias is added as the product's outputs are stored, where an add after
    the product would read and write them all again). No gradient is recorded: `teenygrad.ops.fused.linear`,
    which calls this with detached tensors, records its own."""
    device = devices.same("matmul_bias", a, b, bias)
    if b.ndim != 2 or bias.shape != (b.shape[1],) or a.ndim == 0 or a.shape[-1] != b.shape[0]:
        raise ValueError(f"matmul_bias: shapes {a.shape} @ {b.shape} + {bias.shape}: expected (..., K) @ (K, N) + (N,)")
    dtype = result_dtype(a.dtype, b.dtype)
    return _rows_times(a, b, float32 if dtype == int64 else dtype, device, bias)


@exercise("06-tensor-autograd", "matmul_rules")
def matmul_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor | bool, Tensor | bool]:
    """The backward rule of the op "matmul", out = a @ b with numpy's rules. ctx.a, ctx.b: the operands as the
    forward received them (each >= 1-D); ctx.needs: does each need a gradient; g: dL/dout, of out's shape.

    For 2-D operands, da = g @ b^T and db = a^T @ g. Batch dims (all but the last two) broadcast in the forward,
    so each gradient is summed back to its operand's shape (`unbroadcast`). A 1-D a was a row vector (1, K) and a
    1-D b a column vector (K, 1), whose dim the forward dropped from out: put it back in g, and take it out of the
    gradient again. Returns (da, db), each of its operand's shape, or False for an operand that needs none (not
    computed). When b is 2-D (shared by the whole batch: a layer's weight), db is one (K, rows) @ (rows, N)
    product over every row of the batch, not a batch of products summed afterwards."""
    a, b = ctx.a, ctx.b
    a2, b2 = (a.reshape(1, -1) if a.ndim == 1 else a), (b.reshape(-1, 1) if b.ndim == 1 else b)
    g = g.unsqueeze(-1) if b.ndim == 1 else g
    g = g.unsqueeze(-2) if a.ndim == 1 else g
    da = ctx.needs[0] and unbroadcast(g @ b2.transpose(-1, -2), a2.shape).reshape(a.shape)
    if not ctx.needs[1]:
        return da, False
    if b2.ndim == 2:  # b shared by the whole batch: fold the batch into one (K, rows) @ (rows, N) product
        return da, (a2.reshape(-1, a2.shape[-1]).T @ g.reshape(-1, g.shape[-1])).reshape(b.shape)
    return da, unbroadcast(a2.transpose(-1, -2) @ g, b2.shape).reshape(b.shape)


RULES = {"matmul": matmul_backward}  # da = g @ b^T, db = a^T @ g
