"""Cross-entropy (chapters 4 and 6), fused: one kernel forward, one backward (`teenygrad.kernels.loss`).

Composed from ops it would be log_softmax, gather, mean and their three backwards; fused, the forward keeps
only each row's log-sum-exp and the backward writes softmax - onehot in one pass. The forward's kernel and the
backward's are exercise 4's pieces; the rule that launches the backward's, `cross_entropy_grad`, is exercise 6's.
"""
from __future__ import annotations

import numpy as np

from teenygrad import autograd, devices, tracing
from teenygrad.edition import exercise
from teenygrad.kernels import on
from teenygrad.ops.buffers import as_float, cast, contiguous, detached, new
from teenygrad.ops.elementwise import binary
from teenygrad.ops.movement import index_tensor
from teenygrad.ops.reductions import reduce
from teenygrad.tensor import Tensor


def cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """mean over rows of -log softmax(logits)[target]: logits (..., C), int64 targets of shape (...).

    Computed as log-sum-exp minus the target's logit, with the max subtracted inside the exp, so huge
    logits neither overflow nor lose the loss; the backward is softmax - onehot in one kernel."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.cross_entropy(logits, targets)
    logits, targets = as_float(logits), index_tensor(targets, "cross_entropy", logits.device)
    device = devices.same("cross_entropy", logits, targets)
    if logits.ndim == 0 or targets.shape != logits.shape[:-1]:
        raise ValueError(f"cross_entropy: targets of shape {targets.shape} must be the shape of logits {logits.shape} "
                         f"without its last (class) axis")
    x = contiguous(detached(logits))
    R, C = targets.size, logits.shape[-1]
    if R == 0 or C == 0:
        raise ValueError(f"cross_entropy: need at least one row and one class, got logits of shape {logits.shape}")
    x, t = x.reshape(R, C), targets.reshape(R)
    lse, losses = devices.empty(R, np.float64, device), devices.empty(R, np.float64, device)  # per-row results
    on(device)["cross_entropy"](x._buf[x.offset:x.offset + x.size], t._buf[t.offset:t.offset + R], lse, losses)
    out = cast(binary("mul", reduce("sum", Tensor._contiguous(losses, (R,)), None, False), 1.0 / R), x.dtype)
    if logits._requires_grad:
        autograd.record("cross_entropy", out, (logits,), x=x, targets=t, lse=Tensor._contiguous(lse, (R,)),
                        shape=logits.shape)
    return out


@exercise("06-tensor-autograd", "kernel_launchers")
def cross_entropy_grad(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """The backward rule of the op "cross_entropy", loss = mean over the R rows of lse_r - x[r, t_r]. g: dL/dloss,
    a 0-d tensor. ctx.x: the logits as a contiguous (R, C) tensor; ctx.targets: contiguous int64 (R,); ctx.lse: the
    forward's per-row log-sum-exp, contiguous float64 (R,); ctx.shape: the logits' shape as the op received them.
    Returns (dx,), dx = g (softmax(x) - onehot(t)) / R, a new tensor of ctx.shape and x's dtype, written by one
    call of exercise 4's kernel `KERNELS["cross_entropy_backward"](x, t, lse, scale, dx)` (flat numpy arrays of
    exactly R*C, R, R and R*C elements): it never recomputes the log-sum-exp, so huge logits stay finite."""
    x, t = ctx.x, ctx.targets
    dx = new(x.shape, x.dtype, x.device)
    on(x.device)["cross_entropy_backward"](x._buf[x.offset:x.offset + x.size], t._buf[t.offset:t.offset + t.size],
                                      ctx.lse._buf, float(g.item()) / t.size, dx._buf)
    return (dx.reshape(ctx.shape),)


RULES = {"cross_entropy": cross_entropy_grad}  # (softmax - onehot) / rows
