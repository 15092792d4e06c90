"""Optimizers, learning-rate schedules and gradient clipping (chapter 7; `from teenygrad import optim`).

    opt = optim.AdamW(model.parameters(), lr=3e-4)
    for step in range(steps):
        opt.lr = optim.lr_at(step, steps, 3e-4, warmup=100)      # optional: a schedule
        loss = loss_fn(model(x), y)
        opt.zero_grad()                                          # backward *adds* into .grad
        loss.backward()
        optim.clip_grad_norm(model.parameters(), 1.0)            # optional
        opt.step()

Each step calls one fused kernel per parameter (SGD's inside `sgd_update`, Adam's inside `adam_update`: pieces
of exercise 7, like `lr_at` and `clip_grad_norm`) that updates the parameter's buffer in place, so the Tensor
objects (and anything holding them: the model, the optimizer) stay the same. The write goes to the buffer
directly, not through `t[...] = v`, so it does not bump the autograd version counter: the update happens after
backward, and the next forward builds a new graph. A parameter whose .grad is None (unused in this step's loss)
is skipped and its state left as it was.

On a GPU the book's step and clipping make fewer launches than one a parameter: the GPU table's group kernels update
GROUP parameters a launch, and the clipping's norm comes back in one copy, not one a gradient
(teenygrad/kernels/cuda/optim.py).
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from teenygrad import devices, tracing
from teenygrad.edition import exercise
from teenygrad.kernels import on
from teenygrad.kernels.jit import kernel
from teenygrad.ops.buffers import contiguous, full_buffer
from teenygrad.tensor import Tensor, float32, float64

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_at", "Schedule", "clip_grad_norm", "collect_params",
           "flat_buffer", "grad_buffer"]


def flat_buffer(t: Tensor) -> np.ndarray:
    """The contiguous 1-D slice of t's buffer holding exactly its elements (shares memory with t: writing into it
    writes into t). t must be contiguous, as parameters and their optimizer state are."""
    return t._buf[t.offset:t.offset + t.size]


def grad_buffer(p: Tensor) -> np.ndarray:
    """p.grad as a contiguous 1-D buffer of p's dtype (it usually already is one: then no copy)."""
    g = contiguous(p.grad, p.dtype)
    if g.shape != p.shape:
        raise ValueError(f"optimizer: a gradient of shape {g.shape} for a parameter of shape {p.shape}")
    return flat_buffer(g)


@exercise("07-neural-nets", "optimizer")
def collect_params(params: Iterable[Tensor]) -> list[Tensor]:
    """The parameters an optimizer holds, from any iterable (a generator too): each a leaf Tensor that requires
    grad (else TypeError), contiguous float32 or float64 (else TypeError), kept once and in order (a tied weight
    listed twice must not be stepped twice). An empty list -> ValueError (a bad item is a TypeError, even alone)."""
    kept, seen = [], set()
    for p in params:
        if not isinstance(p, Tensor) or not p.requires_grad or not p.is_leaf:
            raise TypeError("optimizer: parameters must be leaf Tensors with requires_grad=True")
        if p.dtype not in (float32, float64) or not p.is_contiguous():
            raise TypeError(f"optimizer: parameters must be contiguous float32/float64 tensors, got {p.dtype}")
        if id(p) not in seen:
            seen.add(id(p))
            kept.append(p)
    if not kept:
        raise ValueError("optimizer: got an empty parameter list")
    return kept


def _one_gpu(buffers: list) -> str | None:
    """The device, when every buffer is on one and the same GPU with one dtype (what the group kernels take)."""
    found = {(devices.of(b), str(b.dtype)) for b in buffers}
    device = next(iter(found))[0] if len(found) == 1 else "cpu"
    return None if device == "cpu" else device


class Optimizer:
    """Holds the parameters (each once, in order) and a mutable learning rate `lr`; subclasses define
    `_update(i, p, g)` for parameter number i with its flat buffer p and gradient g."""

    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        self.params: list[Tensor] = collect_params(params)
        if lr < 0:
            raise ValueError(f"optimizer: lr must be >= 0, got {lr}")
        self.lr = float(lr)
        self.steps = 0  # number of step() calls so far

    @exercise("07-neural-nets", "optimizer")
    def zero_grad(self) -> None:
        """Set every parameter's .grad to None (the next backward starts from nothing)."""
        for p in self.params:
            p.grad = None

    @tracing.hooked("optimizer_step")  # inside teenygrad.compile's trace: the updates become assigns
    @exercise("07-neural-nets", "optimizer")
    def step(self) -> None:
        """Count the step (self.steps), then update every parameter that has a gradient, in place: parameter
        number i with `self._update(i, flat_buffer(p), grad_buffer(p))`. One without a .grad is skipped."""
        self.steps += 1
        if self._stepped_on_gpu():  # on a GPU, the book updates GROUP parameters a launch
            return
        for i, p in enumerate(self.params):
            if p.grad is not None:
                self._update(i, flat_buffer(p), grad_buffer(p))

    def _stepped_on_gpu(self) -> bool:
        """On a GPU (every parameter on one, of one dtype), when the optimizer has `_update_group`: every parameter
        with a gradient updated by the GPU table's group kernels, GROUP a launch; True if so."""
        device = _one_gpu([flat_buffer(p) for p in self.params]) if hasattr(self, "_update_group") else None
        if device is not None:
            stepped = [i for i, p in enumerate(self.params) if p.grad is not None]
            self._update_group(device, stepped, [flat_buffer(self.params[i]) for i in stepped],
                               [grad_buffer(self.params[i]) for i in stepped])
        return device is not None

    def _update(self, i: int, p: np.ndarray, g: np.ndarray) -> None:
        raise NotImplementedError

    def _state(self, store: dict[int, np.ndarray], i: int) -> np.ndarray:
        """Per-parameter state, zeros on first use, on the parameter's device (numpy is storage on the CPU)."""
        p = self.params[i]
        if i not in store:
            store[i] = full_buffer(p.size, 0, p.dtype, p.device)
        elif devices.of(store[i]) != p.device:  # the model moved (`Module.to`): its state follows
            store[i] = devices.from_host(devices.to_host(store[i]), p.device)
        return store[i]


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's formulation:
        d = g + weight_decay * p;   v = momentum * v + d (v starts at 0);   p -= lr * v   (v = d without momentum)
    Momentum averages the recent gradients, so steps along a consistent direction grow (to 1/(1-momentum)
    times the plain step) while zig-zags across a narrow valley cancel."""

    def __init__(self, params: Iterable[Tensor], lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        self.velocity: dict[int, np.ndarray] = {}

    def _update(self, i: int, p: np.ndarray, g: np.ndarray) -> None:
        buf = self._state(self.velocity, i) if self.momentum else p[:0]  # no state without momentum
        update = sgd_update if devices.of(p) == "cpu" else on(devices.of(p))["sgd_update"]  # the GPU's own kernel
        update(p, g, buf, self.lr, self.momentum, self.weight_decay)

    def _update_group(self, device: str, indices: list[int], ps: list, gs: list) -> None:
        bufs = [self._state(self.velocity, i) for i in indices] if self.momentum else [p[:0] for p in ps]
        on(device)["sgd_update_group"](ps, gs, bufs, self.lr, self.momentum, self.weight_decay)


class Adam(Optimizer):
    """Adam: running averages of the gradient (m) and of its square (v), both started at 0, so the first
    steps divide by 1 - beta^t to undo the bias toward 0. Each element steps by about lr * m / sqrt(v):
    the same size whatever the gradient's scale, which is why one learning rate suits most layers.
        g = grad + weight_decay * p   (L2, folded into the gradient: PyTorch's Adam)
        m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,  p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)"""

    decoupled = False

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        super().__init__(params, lr)
        self.betas, self.eps, self.weight_decay = (float(betas[0]), float(betas[1])), float(eps), float(weight_decay)
        self.m: dict[int, np.ndarray] = {}
        self.v: dict[int, np.ndarray] = {}
        self.t: dict[int, int] = {}  # steps taken by each parameter (one skipped in a step is not counted)

    def _update(self, i: int, p: np.ndarray, g: np.ndarray) -> None:
        t = self.t[i] = self.t.get(i, 0) + 1
        update = adam_update if devices.of(p) == "cpu" else on(devices.of(p))["adam_update"]  # the GPU's own kernel
        update(p, g, self._state(self.m, i), self._state(self.v, i), self.lr, self.betas[0], self.betas[1],
                    self.eps, self.weight_decay, self.decoupled, t)

    def _update_group(self, device: str, indices: list[int], ps: list, gs: list) -> None:
        for i in indices:
            self.t[i] = self.t.get(i, 0) + 1
        on(device)["adam_update_group"](ps, gs, [self._state(self.m, i) for i in indices],
                                        [self._state(self.v, i) for i in indices], self.lr, self.betas[0],
                                        self.betas[1], self.eps, self.weight_decay, self.decoupled,
                                        [self.t[i] for i in indices])


class AdamW(Adam):
    """Adam with *decoupled* weight decay (Loshchilov & Hutter): p -= lr * weight_decay * p, then the Adam
    step on the plain gradient. With L2 (Adam's weight_decay) the decay is divided by sqrt(v) like the
    gradient, so parameters with large gradients are barely decayed; decoupled decay shrinks all alike."""

    decoupled = True

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.01) -> None:
        super().__init__(params, lr, betas, eps, weight_decay)


_COMPILED: dict[str, object] = {}  # sgd_update's and adam_update's kernels, each compiled on its first call


@exercise("07-neural-nets", "sgd_update")
def sgd_update(p: np.ndarray, g: np.ndarray, buf: np.ndarray, lr: float, momentum: float,
               weight_decay: float) -> None:
    """One step of SGD (PyTorch's formulation) for one parameter, in place, in one pass over its elements:
        d = g + weight_decay * p;   with momentum: buf = momentum * buf + d, then d = buf;   p -= lr * d
    p (the parameter), g (its gradient) and buf (the velocity, zeros before the first step; empty when momentum
    is 0) are contiguous 1-D numpy buffers of one dtype; p and buf are updated, g is left as it is. None."""
    run = _COMPILED.get("sgd")
    if run is None:  # defined here, like adam_update's: nothing else in the package computes this piece
        @kernel
        def sgd_kernel(p, g, buf, lr, momentum, weight_decay):
            for i in range(p.size):
                d = g[i] + weight_decay * p[i]
                if momentum != 0.0:
                    b = momentum * buf[i] + d
                    buf[i] = b
                    d = b
                p[i] = p[i] - lr * d
        run = _COMPILED["sgd"] = sgd_kernel
    run(p, g, buf, lr, momentum, weight_decay)


@exercise("07-neural-nets", "adam_update")
def adam_update(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, lr: float, beta1: float,
                beta2: float, eps: float, weight_decay: float, decoupled: bool, t: int) -> None:
    """Step t (1, 2, ...) of Adam (decoupled=False, L2 weight decay) or AdamW (decoupled=True) for one
    parameter, in place: p (the parameter), g (its gradient), m and v (the running averages, zeros before
    step 1) are contiguous 1-D numpy buffers of one dtype; p, m and v are updated, g is left as it is.
    Returns None."""
    run = _COMPILED.get("adam")
    if run is None:  # the kernel is defined here, so nothing else in the package computes this piece
        @kernel(numpy_errors=True)  # no zero-divisor check per element: the loop vectorises (about 9x faster)
        def adam_kernel(p, g, m, v, step, inv_root_bias2, shrink, l2, beta1, beta2, eps):
            """m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr (m / bias1) / (sqrt(v / bias2) + eps),
            with the scalars folded before the loop (PyTorch's arrangement): one sqrt and one division."""
            for i in range(p.size):
                pi = p[i]
                gi = g[i] + l2 * pi
                mi = beta1 * m[i] + (1.0 - beta1) * gi
                vi = beta2 * v[i] + (1.0 - beta2) * gi * gi
                m[i] = mi
                v[i] = vi
                p[i] = pi * shrink - step * mi / (math.sqrt(vi) * inv_root_bias2 + eps)
        run = _COMPILED["adam"] = adam_kernel
    # Adam (L2) adds wd * p to the gradient, so its decay is divided by sqrt(v) like the gradient; AdamW
    # shrinks p by lr * wd first, the same for every element. The choice becomes two numbers: no branch.
    shrink = 1.0 - lr * weight_decay if decoupled else 1.0
    l2 = 0.0 if decoupled else weight_decay
    bias1, bias2 = 1.0 - beta1 ** t, 1.0 - beta2 ** t
    run(p, g, m, v, lr / bias1, 1.0 / math.sqrt(bias2), shrink, l2, beta1, beta2, eps)


# ---- learning-rate schedules ---------------------------------------------------------------------------------

@exercise("07-neural-nets", "lr_at")
def lr_at(step: int, total_steps: int, base_lr: float, warmup: int = 0, kind: str = "cosine",
          min_lr: float = 0.0) -> float:
    """The learning rate for step `step` (0-based) of `total_steps`:
        warmup      step < warmup:  base_lr * (step + 1) / warmup  (linear ramp; big early steps on random
                    weights, and Adam's noisy first estimates of v, are what warmup avoids)
        then, with progress q = (step - warmup) / max(1, total_steps - warmup) clipped to [0, 1]:
        "cosine"    min_lr + (base_lr - min_lr) * (1 + cos(pi q)) / 2
        "linear"    base_lr + (min_lr - base_lr) * q
        "constant"  base_lr
    Any other kind: ValueError.
    """
    if kind not in ("cosine", "linear", "constant"):
        raise ValueError(f"lr_at: kind must be 'cosine', 'linear' or 'constant', got {kind!r}")
    if step < warmup:
        return base_lr * (step + 1) / warmup
    q = min(1.0, max(0.0, (step - warmup) / max(1, total_steps - warmup)))
    if kind == "cosine":
        return min_lr + (base_lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * q))
    if kind == "linear":
        return base_lr + (min_lr - base_lr) * q
    return base_lr


class Schedule:
    """Drives `opt.lr` by lr_at: sets the rate of step 0 at once, then `.step()` after each opt.step()
    moves to the next (PyTorch's scheduler protocol). `base_lr` defaults to the optimizer's lr."""

    def __init__(self, opt: Optimizer, total_steps: int, warmup: int = 0, kind: str = "cosine",
                 min_lr: float = 0.0, base_lr: float | None = None) -> None:
        self.opt, self.total_steps, self.warmup, self.kind, self.min_lr = opt, total_steps, warmup, kind, min_lr
        self.base_lr = opt.lr if base_lr is None else float(base_lr)
        self.t = 0
        opt.lr = self.lr

    @property
    def lr(self) -> float:
        return lr_at(self.t, self.total_steps, self.base_lr, self.warmup, self.kind, self.min_lr)

    def step(self) -> None:
        self.t += 1
        self.opt.lr = self.lr


# ---- gradient clipping -------------------------------------------------------------------------------------

@tracing.hooked("clip_grad_norm")  # inside teenygrad.compile's trace: the norm a 0-d tensor, the scaling a `where`
@exercise("07-neural-nets", "clip_grad_norm")
def clip_grad_norm(params: Iterable[Tensor], max_norm: float) -> float:
    """Scale all gradients together so that their joint L2 norm sqrt(sum of every g_i^2) is at most
    max_norm; returns the norm before clipping. The direction of the step is kept, only its length is
    capped: one huge gradient (a rare bad batch) then cannot throw the weights far away."""
    grads, seen = [], set()
    for p in params:
        if p.grad is not None and id(p) not in seen:  # a tied weight counts once
            seen.add(id(p))
            p.grad = contiguous(p.grad)
            grads.append(flat_buffer(p.grad))
    on_gpu = _clipped_on_gpu(grads, max_norm)  # on a GPU, the book's norm comes back in one copy
    if on_gpu is not None:
        return on_gpu
    total = math.sqrt(sum(on(devices.of(g))["sum_of_squares"](g) for g in grads))
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:
        for g in grads:
            on(devices.of(g))["scale"](g, coef)
    return total


def _clipped_on_gpu(grads: list, max_norm: float) -> float | None:
    """`clip_grad_norm` for flat gradients all on one GPU, of one dtype: the norm from the GPU table's
    `sum_of_squares_group` (one copy back, not one a gradient), the scaling GROUP gradients a launch. None (nothing
    done) when they are not."""
    device = _one_gpu(grads) if grads else None
    if device is None:
        return None
    total = math.sqrt(on(device)["sum_of_squares_group"](grads))
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:
        on(device)["scale_group"](grads, coef)
    return total
