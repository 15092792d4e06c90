"""A tiny neural network made of Values (chapter 5): Neuron, Layer, MLP, softmax cross-entropy, SGD.

Every weight is its own `Value`, every multiply-add its own node: slow, but nothing is hidden.
A neuron computes act(w . x + b); a layer is a list of neurons reading the same inputs; an MLP is a
list of layers. The last layer has no activation: its outputs are logits (or a raw score).
"""
from __future__ import annotations

import math
import random
from typing import Sequence

from teenygrad.value import Value


class Neuron:
    """act(sum_i w_i x_i + b), act one of "tanh", "relu", "sigmoid" or "" (none: a linear unit)."""

    def __init__(self, nin: int, act: str = "tanh", rng: random.Random | None = None):
        rng = rng or random.Random(0)
        scale = 1.0 / math.sqrt(nin)  # keeps w . x near unit size whatever nin is, so tanh does not saturate
        self.w = [Value(rng.uniform(-scale, scale)) for _ in range(nin)]
        self.b = Value(0.0)
        self.act = act

    def __call__(self, x: Sequence[Value | float]) -> Value:
        s = self.b
        for wi, xi in zip(self.w, x):
            s = s + wi * xi  # one mul and one add node per input
        return getattr(s, self.act)() if self.act else s

    def parameters(self) -> list[Value]:
        return self.w + [self.b]


class Layer:
    """`nout` neurons, each reading all `nin` inputs."""

    def __init__(self, nin: int, nout: int, act: str = "tanh", rng: random.Random | None = None):
        rng = rng or random.Random(0)
        self.neurons = [Neuron(nin, act, rng) for _ in range(nout)]

    def __call__(self, x: Sequence[Value | float]) -> list[Value]:
        return [n(x) for n in self.neurons]

    def parameters(self) -> list[Value]:
        return [p for n in self.neurons for p in n.parameters()]


class MLP:
    """Layers of sizes nin -> sizes[0] -> ... -> sizes[-1]; `act` between layers, none after the last."""

    def __init__(self, nin: int, sizes: Sequence[int], act: str = "tanh", seed: int = 0):
        rng = random.Random(seed)
        dims = [nin, *sizes]
        self.layers = [Layer(dims[i], dims[i + 1], act if i < len(sizes) - 1 else "", rng)
                       for i in range(len(sizes))]

    def __call__(self, x: Sequence[Value | float]) -> list[Value]:
        for layer in self.layers:
            x = layer(x)
        return list(x)

    def parameters(self) -> list[Value]:
        return [p for layer in self.layers for p in layer.parameters()]


def cross_entropy(logits: Sequence[Value], target: int | Sequence[Value | float]) -> Value:
    """-log softmax(logits)[target], with `target` a class index or a one-hot list (of Values, so a compiled
    tape can be fed new targets; see teenygrad.tape).

    log softmax(z)_k = (z_k - m) - log sum_j exp(z_j - m) for any m; m = max_j z_j keeps every exp <= 1
    (no overflow). m is a node (a chain of "max" ops), not a frozen number, so a tape recomputes it for
    every example; softmax does not depend on m, so the gradient through it, 1 - sum_j p_j, is 0 up to rounding.
    """
    m = logits[0]
    for z in logits[1:]:
        m = m.max(z)
    shifted = [z - m for z in logits]
    total = shifted[0].exp()
    for z in shifted[1:]:
        total = total + z.exp()
    log_sum = total.log()
    if isinstance(target, int):
        return log_sum - shifted[target]
    picked = shifted[0] * target[0]  # the dot product with a one-hot vector picks the target's logit
    for z, t in zip(shifted[1:], target[1:]):
        picked = picked + z * t
    return log_sum - picked


def sgd_step(params: Sequence[Value], lr: float) -> None:
    """p <- p - lr * dL/dp, then zero the gradients (Value leaves accumulate them)."""
    for p in params:
        p.data -= lr * p.grad
        p.grad = 0.0
