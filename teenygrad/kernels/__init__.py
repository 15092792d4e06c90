"""The kernel registry (chapter 3): which function computes each op, and how to swap in your own.

Every Tensor op looks up its kernel here by name at call time, in the dict `KERNELS`. To try your own
kernel, swap it in for a `with` block; the previous kernel comes back afterwards, even on an error:

    import teenygrad
    with teenygrad.kernels.use(add=my_add):
        c = a + b                     # runs my_add

A kernel never allocates its output and never sees a Tensor: the Tensor hands it flat numpy buffers,
integer shapes/strides and a preallocated `out`, and the kernel fills `out`. Kernels may be plain Python
(slow but fine for small tests) or decorated with `teenygrad.kernels.kernel` to compile them with numba.
`KERNELS` below is the whole table, forward and backward, fused ones included: every op in `teenygrad.ops`
calls its kernels through it, so `use` can swap any of them.

Calling conventions
-------------------
Notation: a *buffer* is a 1-D numpy array holding a tensor's elements; a strided operand is
(buffer, strides, offset) and its element at index (i0, ..., ik) is
buffer[offset + i0*strides[0] + ... + ik*strides[k]]. `shape` and `strides` are 1-D int64 arrays.
Shapes are *coalesced* (>= 1 dim, no size-1 dims, mergeable dims merged), and never contain a 0:
empty tensors skip the kernel. All buffers of one call share a dtype (float32, float64, or int64 where
it makes sense) except `copy`, which converts, and index arrays, which are int64.

Elementwise, unary (neg exp log sqrt tanh sigmoid relu gelu abs):
    fn(shape, x, x_strides, x_offset, out)
        out: contiguous buffer of prod(shape) elements in row-major order; out[flat(i)] = f(x(i)).
Elementwise, binary (add sub mul div pow maximum eq ne lt le gt ge):
    fn(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)
        out[flat(i)] = f(a(i), b(i)). Broadcast dims have stride 0 (a scalar is a 1-element buffer with
        all strides 0). Comparisons write 1 or 0 into `out` (same dtype as the inputs).
Reductions (sum max argmax), over the last axis of an (M, N) matrix:
    fn(x, x_offset, M, sm, N, sn, out)
        element (m, n) is x[x_offset + m*sm + n*sn]; out: contiguous length M; out[m] = reduce over n.
        argmax's out is int64 (position n). max/argmax get N >= 1; sum may get N == 0.
Row-wise (softmax log_softmax): same arguments as reductions, but out is contiguous (M*N,) row-major.
Matrix multiply, on contiguous numpy arrays of one float dtype, `out` preallocated:
    matmul(a, b, out)            a: (M, K), b: (K, N), out: (M, N)        (see `matmul.py`)
    matmul_batched(a, b, out)    a: (B, M, K), b: (B, K, N), out: (B, M, N)
    matmul_bias(a, b, bias, out) a: (M, K), b: (K, N), bias: (N,), out: (M, N): out = a @ b + bias on every row
        (a linear layer's forward; here the table's matmul, then its add_bias; the GPU's is one launch)
        out is overwritten with the product (zeros when K == 0).
        (teenygrad's own `matmul` is also handed transposed or sliced operands as strided views, which its
        packing reads in place; a kernel you swap in always gets contiguous arrays.)
Movement (see `movement.py`):
    copy(shape, src, src_strides, src_offset, dst, dst_strides, dst_offset)     dst(i) = src(i)
    gather(x, idx, out, outer, n_src, n_idx, inner)                           out[o,k,i] = x[o,idx[o,k,i],i]
    index_select(x, idx, out, outer, n_src, inner)                            out[o,k,i] = x[o,idx[k],i]
    Their backwards are pieces, each with its kernel inside it (`teenygrad.ops.movement`): gather's,
        `scatter_add`, of exercise 6; index_select's, `index_add`, of exercise 8
Backward kernels beside their forwards: gelu_backward (binary convention, out = g * gelu'(x));
    softmax_backward / log_softmax_backward(y, g, M, N, dx) (see `softmax.py`).
Losses (see `loss.py`): cross_entropy(x, t, lse, losses), cross_entropy_backward(x, t, lse, scale, dx).
Fused transformer ops (see `fused.py`): add_bias, layer_norm, rms_norm, attention. The backward of
    layer_norm, of rms_norm and of attention and the KV-cached attention are pieces of exercise 9, with their
    kernels inside them (`teenygrad.ops.fused`).
Optimizer updates (see `optim.py`): sgd, and sum_of_squares / scale for gradient clipping. Adam's update is a
    piece of exercise 7 (`teenygrad.optim.adam_update`), with its kernel inside it.
"""
from __future__ import annotations

import functools
from typing import Callable, ContextManager

from teenygrad._swap import swapped
from teenygrad.kernels import elementwise, fused, loss, movement, optim, reduce, softmax
from teenygrad.kernels.jit import force_path, kernel
from teenygrad.kernels.matmul import matmul, matmul_batched


def _comparison(code: int) -> Callable:
    return functools.partial(elementwise.compare, code)


def matmul_bias(a, b, bias, out) -> None:
    """out = a @ b + bias, bias (N,) added to every row: the table's `matmul`, then its `add_bias` (looked up at the
    call, so a kernel swapped in for either runs here too)."""
    KERNELS["matmul"](a, b, out)
    KERNELS["add_bias"](out, bias)


KERNELS: dict[str, Callable] = {
    # elementwise (elementwise.py): out = f(x), out = f(a, b), comparisons; gelu's derivative
    **elementwise.UNARY, **elementwise.BINARY,
    **{name: _comparison(code) for code, name in enumerate(elementwise.COMPARISONS)},
    "gelu_backward": elementwise.gelu_backward,
    # reductions over the last axis of an (M, N) view (reduce.py), row-wise softmax and its backward (softmax.py)
    "sum": reduce.sum_rows, "max": reduce.max_rows, "argmax": reduce.argmax_rows,
    "softmax": softmax.softmax, "log_softmax": softmax.log_softmax,
    "softmax_backward": softmax.softmax_backward, "log_softmax_backward": softmax.log_softmax_backward,
    # matrix products (matmul.py)
    "matmul": matmul, "matmul_batched": matmul_batched, "matmul_bias": matmul_bias,
    # movement (movement.py): copies and casts, indexing
    "copy": movement.copy, "gather": movement.gather, "index_select": movement.index_select,
    # losses (loss.py)
    "cross_entropy": loss.cross_entropy, "cross_entropy_backward": loss.cross_entropy_backward,
    # the transformer's fused ops (fused.py), forward and backward
    **fused.KERNELS,
    # gradient clipping (optim.py; the optimizers' updates are exercise 7's pieces, in teenygrad.optim)
    "sum_of_squares": optim.sum_of_squares, "scale": optim.scale,
}

DEFAULTS: dict[str, Callable] = dict(KERNELS)

# The table's device dimension (chapter 11): the op layer launches `on(tensor.device)[name]`. "cuda"'s table is
# `teenygrad.kernels.cuda.KERNELS`, added the first time a tensor goes to the GPU (importing teenygrad does not
# import numba.cuda); it has the same names and calling conventions, its buffers numba-cuda device arrays.
TABLES: dict[str, dict[str, Callable]] = {"cpu": KERNELS}


def on(device: str) -> dict[str, Callable]:
    """The kernel table of `device` ("cpu" or "cuda"), as it is now (`use` swaps entries for a block)."""
    table = TABLES.get(device)
    if table is None:
        if device != "cuda":
            raise ValueError(f"unknown device {device!r}: teenygrad has 'cpu' and 'cuda'")
        from teenygrad.kernels import cuda
        table = TABLES["cuda"] = cuda.KERNELS
    return table


def get(name: str) -> Callable:
    """The kernel currently registered under `name`."""
    try:
        return KERNELS[name]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r}; known kernels: {', '.join(sorted(KERNELS))}") from None


def use(device: str = "cpu", **swaps: Callable) -> ContextManager[None]:
    """Run a block with some kernels replaced: `with use(add=my_add, exp=my_exp): ...`; `use("cuda", add=...)`
    swaps the GPU's.

    The old kernels are restored when the block ends, also when it raises.
    """
    return swapped(on(device), "kernel" if device == "cpu" else f"{device} kernel", **swaps)


def reset() -> None:
    """Put every default kernel back (after an experiment that replaced `KERNELS[...]` by hand)."""
    KERNELS.clear()
    KERNELS.update(DEFAULTS)


__all__ = ["KERNELS", "DEFAULTS", "TABLES", "on", "get", "use", "reset", "kernel", "force_path"]
