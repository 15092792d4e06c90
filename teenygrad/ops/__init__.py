"""The op layer (chapters 2, 6 and 9): every Tensor op in one place per family, its forward launcher and its
gradient rule side by side.

    elementwise   neg exp log ... gelu, add sub mul div pow maximum, comparisons
    reductions    sum max argmax mean, softmax log_softmax
    movement      views' rules, copy and cast, gather index_select cat stack
    matmul        matrix products
    losses        cross_entropy
    fused         linear layer_norm rms_norm attention (chapter 9)

A *launcher* checks its arguments (errors name the op and the shapes), picks the result's dtype and shape,
allocates it, lays the operands out as its kernel's calling convention says and calls the kernel through the
table `teenygrad.kernels.KERNELS`, so `kernels.use` can swap any of them. When an input requires grad it
records one node (`autograd.record`); the node's rule, found by op name in `RULES` when backward runs, turns
dL/d(out) into dL/d(inputs). `RULES` is assembled here, once, from the families' tables; `autograd.use_rules`
swaps entries for a block.
"""
from __future__ import annotations

from typing import Callable

# The Tensor first, whichever module asked for the op layer: the families import `Tensor`, and tensor.py imports
# the families at its end, when Tensor is complete (teenygrad's one import loop, Tensor <-> ops).
from teenygrad import tensor  # noqa: F401
from teenygrad.ops import buffers, elementwise, fused, losses, matmul, movement, reductions

RULES: dict[str, Callable] = {**elementwise.RULES, **reductions.RULES, **movement.RULES, **matmul.RULES,
                              **losses.RULES, **fused.RULES}
DEFAULT_RULES: dict[str, Callable] = dict(RULES)

__all__ = ["RULES", "DEFAULT_RULES", "buffers", "elementwise", "reductions", "movement", "matmul", "losses", "fused"]
