"""teenygrad's GPU kernels in numba-cuda (chapter 11): elementwise ops, reductions, the softmax, the SGEMM ladder.

Importing this module imports numba.cuda; importing `teenygrad` does not. Where they run is decided first
(`device.py`): on a GPU when a CUDA driver is found, else in numba-cuda's simulator, which runs every block's
threads as Python threads on the CPU (shared memory and `syncthreads` work; warp shuffles do not). The environment
variable TEENYGRAD_CUDA = auto (the default) | sim | gpu chooses by hand.

Calling conventions: the CPU kernels' (teenygrad/kernels/__init__.py) where the op exists there; arrays are numba
device arrays (`cuda.to_device`) or numpy arrays (copied to the device and back around each launch: fine for tests,
slow for real work), float32 unless said otherwise, and the launcher never allocates its output.
    elementwise (elementwise.py): unary fn(shape, x, x_strides, x_offset, out),
        binary fn(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)
    reductions (reduce.py): sum_rows(x, out) and softmax_rows(x, out) over the rows of a contiguous (M, N) x;
        sum_rows_warp(x, out) the same sum with warp shuffles, on a GPU only (sum_rows is its twin in the simulator)
    matmul (matmul.py): matmul(a, b, out), a: (M, K), b: (K, N), out: (M, N); `LADDER` holds every rung, from
        naive to double-buffered warp tiles, each a launcher fn(a, b, out, **tile sizes)
    launch configuration (launch.py): launch_config(shape, threads) -> (grid, block)
`KERNELS` is the table by op name, and `use(name=fn)` swaps one in for a `with` block, as `teenygrad.kernels.use`
does for the CPU's.
"""
from __future__ import annotations

from typing import Callable, ContextManager

from teenygrad._swap import swapped
from teenygrad.kernels.cuda import elementwise, launch, matmul, reduce
from teenygrad.kernels.cuda.device import SIMULATED, describe
from teenygrad.kernels.cuda.matmul import LADDER

KERNELS: dict[str, Callable] = {
    **elementwise.UNARY, **elementwise.BINARY,
    "sum": reduce.sum_rows, "softmax": reduce.softmax_rows,
    "matmul": matmul.matmul,
}

# ---- the op layer's products, fused transformer ops and optimizer updates (float32 and float64) -------------------
# matmul (float32 up the ladder, float64 on a tiled kernel) and matmul_batched (the batch on the grid's z axis):
# cuda/matmul.py's `matmul_op` and `matmul_batched`; add_bias, layer_norm, rms_norm, attention and the backward
# kernels the op layer's rules launch (cuda/fused.py); sgd_update, adam_update, sum_of_squares, scale (cuda/optim.py)
from teenygrad.kernels.cuda import fused, optim  # noqa: E402 - kept in this block, beside the entries it adds

KERNELS.update({"matmul": matmul.matmul_op, "matmul_batched": matmul.matmul_batched, **fused.KERNELS, **optim.KERNELS})
# ---- end of the op layer's products, fused ops and optimizer updates ------------------------------------------------


def use(**kernels: Callable) -> ContextManager[None]:
    """Swap GPU kernels in `KERNELS` for a `with` block (the old ones come back afterwards, even on an error)."""
    return swapped(KERNELS, "GPU kernel", **kernels)


__all__ = ["KERNELS", "LADDER", "SIMULATED", "describe", "elementwise", "launch", "matmul", "reduce", "use"]
