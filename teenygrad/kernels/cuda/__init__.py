"""teenygrad's GPU kernels in numba-cuda (chapter 11): the op layer's kernels (elementwise, reductions and softmax,
movement, cross-entropy, products, the fused transformer ops, the optimizers' updates), chapter 11's row reductions
and softmax, the SGEMM ladder.

Importing this module imports numba.cuda; importing `teenygrad` does not. Where they run is decided first
(`device.py`): on a GPU when a CUDA driver is found, else in numba-cuda's simulator, which runs every block's
threads as Python threads on the CPU (shared memory and `syncthreads` work; warp shuffles do not). The environment
variable TEENYGRAD_CUDA = auto (the default) | sim | gpu chooses by hand.

Calling conventions: the CPU kernels' (teenygrad/kernels/__init__.py) where the op exists there; arrays are numba
device arrays (`cuda.to_device`) or numpy arrays (copied to the device and back around each launch: fine for tests,
slow for real work), shapes, strides and index arrays int64, and the launcher never allocates its output.
    elementwise (elementwise.py), float32, float64, int64 where the CPU allows it:
        unary neg exp log sqrt tanh sigmoid relu gelu abs: fn(shape, x, x_strides, x_offset, out),
        binary add sub mul div pow maximum, comparisons eq ne lt le gt ge (1 or 0 in the operands' dtype) and
        gelu_backward (x, then g): fn(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)
    reductions (reduce.py): sum max argmax fn(x, x_offset, M, sm, N, sn, out) over the last axis of an (M, N)
        strided view (argmax's out int64, the first maximum); softmax log_softmax, the same arguments, out contiguous
        (M*N,); softmax_backward log_softmax_backward (y, g, M, N, dx), all contiguous. Chapter 11's own:
        sum_rows(x, out) and softmax_rows(x, out) over the rows of a contiguous float32 (M, N) x; sum_rows_warp(x,
        out) the same sum with warp shuffles, on a GPU only (sum_rows is its twin in the simulator)
    movement (movement.py): copy(shape, src, src_strides, src_offset, dst, dst_strides, dst_offset) (and dtype
        casts), gather(x, idx, out, outer, n_src, n_idx, inner), index_select(x, idx, out, outer, n_src, inner) and
        their backwards, scatter_add(g, idx, out, outer, n_src, n_idx, inner) and index_add(g, idx, out, outer,
        n_src, inner), which add into a zeroed out with atomics; fill(out, value) and arange(out, start, step) make
        zeros, ones and positions on the GPU (no copy from the computer's memory)
    losses (loss.py): cross_entropy(x, t, lse, losses), cross_entropy_backward(x, t, lse, scale, dx)
    products (products.py): matmul(a, b, out), a: (M, K), b: (K, N), out: (M, N), float32 (the SGEMM ladder's top
        rung) or float64, a float32 operand possibly `devices.Transposed(storage)` (read in place);
        matmul_batched(a, b, out), (B, M, K) @ (B, K, N); matmul_bias(a, b, bias, out), out = a @ b + bias (N,) on
        every row, one launch in float32 (the bias added as the outputs are stored)
    the SGEMM ladder (matmul.py): `LADDER` holds every rung, from naive to double-buffered warp tiles, each a float32
        launcher fn(a, b, out, **tile sizes)
    fused (fused.py): add_bias layer_norm rms_norm attention, the CPU's conventions; the backwards the op layer's
        rules launch on the GPU, with the CPU pieces' arguments: layer_norm_backward(x, w, mean, rstd, g, dx, dw, db),
        rms_norm_backward(x, w, rstd, g, dx, dw), attention_backward(qkv, att, g, dqkv)
    optimizers (optim.py): sgd_update(p, g, buf, lr, momentum, weight_decay) and adam_update(p, g, m, v, lr, beta1,
        beta2, eps, weight_decay, decoupled, t), the CPU pieces' arithmetic; sum_of_squares(g) -> float, scale(g, c);
        and each for a list of parameters, GROUP a launch: sgd_update_group, adam_update_group (ts: each one's
        step), sum_of_squares_group (one copy back), scale_group
    counting: launch.counted_launches() counts the launches of a `with` block by kernel
    launch configuration (launch.py): launch_config(shape, threads) -> (grid, block)
`KERNELS` is the table by op name, and `use(name=fn)` swaps one in for a `with` block, as `teenygrad.kernels.use`
does for the CPU's.
"""
from __future__ import annotations

from typing import Callable, ContextManager

from teenygrad._swap import swapped
from teenygrad.kernels.cuda import elementwise, fused, launch, loss, matmul, movement, optim, products, reduce
from teenygrad.kernels.cuda.device import SIMULATED, describe
from teenygrad.kernels.cuda.matmul import LADDER

# The GPU's kernel table: the CPU table's names and calling conventions (so every op of teenygrad.ops runs on
# "cuda"), and the kernels of the rules whose CPU pieces define their own (the fused backwards, the optimizers'
# updates, the scatters), with those pieces' arguments. Chapter 11's sum_rows and softmax_rows stay in reduce.py, for
# the chapter and its exercise; the table's "sum" and "softmax" are the op layer's strided launchers.
KERNELS: dict[str, Callable] = {
    # elementwise (elementwise.py): unary, binary, comparisons, gelu's derivative
    **elementwise.UNARY, **elementwise.BINARY, **elementwise.COMPARISONS, "gelu_backward": elementwise.GELU_BACKWARD,
    # sum max argmax softmax log_softmax softmax_backward log_softmax_backward (reduce.py)
    **reduce.KERNELS,
    # copy gather index_select scatter_add index_add (movement.py); cross_entropy and its backward (loss.py)
    **movement.KERNELS, **loss.KERNELS,
    # products: float32 up the SGEMM ladder, float64 on a tiled kernel; batched with the batch on the grid's z axis
    "matmul": products.matmul, "matmul_batched": products.matmul_batched, "matmul_bias": products.matmul_bias,
    # add_bias layer_norm rms_norm attention and their backwards (fused.py); sgd_update adam_update sum_of_squares
    # scale (optim.py)
    **fused.KERNELS, **optim.KERNELS,
}


def use(**kernels: Callable) -> ContextManager[None]:
    """Swap GPU kernels in `KERNELS` for a `with` block (the old ones come back afterwards, even on an error)."""
    return swapped(KERNELS, "GPU kernel", **kernels)


__all__ = ["KERNELS", "LADDER", "SIMULATED", "describe", "elementwise", "fused", "launch", "loss", "matmul",
           "movement", "optim", "products", "reduce", "use"]
