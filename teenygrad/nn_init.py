"""Initialisers for parameters (chapter 7; `teenygrad.nn.init`), named and behaving like PyTorch's
`torch.nn.init`.

Each one overwrites a tensor in place and returns it. The random ones draw from teenygrad's global
generator, so `teenygrad.manual_seed(s)` makes a model's initial weights reproducible.

Why the scale matters: a layer y = W x with fan_in inputs and weights of variance s^2 gives outputs of
variance fan_in * s^2 * Var(x). Choosing s^2 = 1 / fan_in keeps the variance of the signal the same
from layer to layer, so a deep stack neither explodes nor dies out (chapter 7 plots the histograms).
    xavier (Glorot):  Var(w) = gain^2 * 2 / (fan_in + fan_out)    (a compromise for forward and backward)
    kaiming (He):     Var(w) = gain^2 / fan_in,   gain = sqrt(2) for relu (relu zeroes half the signal)
A uniform(-a, a) has variance a^2 / 3, hence the sqrt(3) in the uniform bounds.
"""
from __future__ import annotations

import math

from teenygrad import autograd
from teenygrad.edition import exercise
from teenygrad.ops.buffers import copy_into
from teenygrad.tensor import Tensor, full, rand, randn

__all__ = ["uniform_", "normal_", "constant_", "zeros_", "ones_", "fans", "calculate_gain", "xavier_uniform_",
           "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]


def _fill(t: Tensor, values: Tensor) -> Tensor:
    """t[...] = values without a version bump: initialising happens before any graph has read t
    (bumping would switch on version tracking for every later op, a cost for nothing)."""
    copy_into(values, t)
    return t


@autograd.no_grad()
def uniform_(t: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill t with samples of uniform(a, b)."""
    return _fill(t, rand(t.shape, dtype=t.dtype) * (b - a) + a)


@autograd.no_grad()
def normal_(t: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill t with samples of normal(mean, std^2)."""
    return _fill(t, randn(t.shape, dtype=t.dtype) * std + mean)


def constant_(t: Tensor, value: float) -> Tensor:
    return _fill(t, full(t.shape, float(value), dtype=t.dtype))


def zeros_(t: Tensor) -> Tensor:
    return constant_(t, 0.0)


def ones_(t: Tensor) -> Tensor:
    return constant_(t, 1.0)


@exercise("07-neural-nets", "xavier")
def fans(t: Tensor) -> tuple[int, int]:
    """(fan_in, fan_out), two ints, of a weight stored as (out, in, *receptive field), PyTorch's layout: in and out
    times the product of the dims after the second. Fewer than 2 dims: ValueError."""
    if t.ndim < 2:
        raise ValueError(f"fan in and fan out need a tensor with at least 2 dims, got shape {t.shape}")
    field = math.prod(t.shape[2:])
    return t.shape[1] * field, t.shape[0] * field


@exercise("07-neural-nets", "xavier")
def calculate_gain(nonlinearity: str) -> float:
    """The factor that undoes how much an activation shrinks the variance, PyTorch's values: 1 for "linear" and
    "sigmoid", 5/3 for "tanh", sqrt(2) for "relu" and "gelu"; another name: ValueError naming the known ones."""
    gains = {"linear": 1.0, "sigmoid": 1.0, "tanh": 5.0 / 3.0, "relu": math.sqrt(2.0), "gelu": math.sqrt(2.0)}
    if nonlinearity not in gains:
        raise ValueError(f"calculate_gain: unknown nonlinearity {nonlinearity!r}; known: {', '.join(gains)}")
    return gains[nonlinearity]


@exercise("07-neural-nets", "xavier")
def xavier_uniform_(t: Tensor, gain: float = 1.0) -> Tensor:
    """Fill t (at least 2 dims, else ValueError) in place from uniform(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)),
    drawn from teenygrad's generator; returns t."""
    fan_in, fan_out = fans(t)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -a, a)


@exercise("07-neural-nets", "xavier")
def xavier_normal_(t: Tensor, gain: float = 1.0) -> Tensor:
    """Fill t (at least 2 dims, else ValueError) in place from normal(0, std^2), std = gain * sqrt(2 / (fan_in +
    fan_out)), drawn from teenygrad's generator; returns t."""
    fan_in, fan_out = fans(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


@exercise("07-neural-nets", "kaiming")
def kaiming_uniform_(t: Tensor, nonlinearity: str = "relu") -> Tensor:
    """uniform(-a, a) with a = gain * sqrt(3 / fan_in)."""
    a = calculate_gain(nonlinearity) * math.sqrt(3.0 / fans(t)[0])
    return uniform_(t, -a, a)


@exercise("07-neural-nets", "kaiming")
def kaiming_normal_(t: Tensor, nonlinearity: str = "relu") -> Tensor:
    """normal(0, std^2) with std = gain / sqrt(fan_in)."""
    return normal_(t, 0.0, calculate_gain(nonlinearity) / math.sqrt(fans(t)[0]))
