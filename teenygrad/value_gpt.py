"""Chapter 9's tiny names GPT written with chapter 5's scalar `Value`s: every number its own graph node.

The same model as `teenygrad.gpt.GPT` with the names configuration (RMSNorm without weights, ReLU, no
biases, untied head), the same weight layout (a Linear weight is (out, in)), so the two can be given the
same weights and must agree. It runs one position at a time, keeping each position's keys and values
(the way a KV cache does): position t attends to positions 0..t. It exists to be measured against:
`benchmarks/names_gpt.py` times a training step of both.
"""
from __future__ import annotations

import math

import numpy as np

from teenygrad.value import Value

Matrix = list[list[Value]]


def matrix(a: np.ndarray) -> Matrix:
    return [[Value(float(x)) for x in row] for row in a]


def linear(x: list[Value], w: Matrix) -> list[Value]:
    """y_o = sum_i w[o][i] x_i"""
    return [sum((wi * xi for wi, xi in zip(row, x)), Value(0.0)) for row in w]


def rms_norm(x: list[Value], eps: float = 1e-5) -> list[Value]:
    scale = (sum((xi * xi for xi in x), Value(0.0)) / len(x) + eps) ** -0.5
    return [xi * scale for xi in x]


def softmax(xs: list[Value]) -> list[Value]:
    mx = max(x.data for x in xs)  # a constant shift: stable, and no gradient flows through it
    exps = [(x - mx).exp() for x in xs]
    total = sum(exps, Value(0.0))
    return [e / total for e in exps]


class ValueGPT:
    """weights: name -> numpy array, named as in `GPT.state_dict()` for the names configuration."""

    def __init__(self, weights: dict[str, np.ndarray], n_head: int) -> None:
        self.n_head = n_head
        self.w = {k: matrix(v) for k, v in weights.items()}
        self.n_layer = sum(1 for k in weights if k.endswith("attn.qkv.weight"))

    def parameters(self) -> list[Value]:
        return [v for m in self.w.values() for row in m for v in row]

    def loss(self, tokens: list[int]) -> Value:
        """Mean cross-entropy of predicting tokens[1:] from the tokens before each."""
        w, nh = self.w, self.n_head
        keys: list[list[list[Value]]] = [[] for _ in range(self.n_layer)]
        values: list[list[list[Value]]] = [[] for _ in range(self.n_layer)]
        losses = []
        for t, (tok, target) in enumerate(zip(tokens[:-1], tokens[1:])):
            x = [a + b for a, b in zip(w["wte.weight"][tok], w["wpe.weight"][t])]
            C = len(x)
            hs = C // nh
            for layer in range(self.n_layer):
                p = f"blocks.{layer}."
                qkv = linear(rms_norm(x), w[p + "attn.qkv.weight"])      # (3C,)
                q, k, v = qkv[:C], qkv[C:2 * C], qkv[2 * C:]
                keys[layer].append(k)
                values[layer].append(v)
                y = []
                for h in range(nh):                                      # head h: columns h*hs:(h+1)*hs
                    s = slice(h * hs, (h + 1) * hs)
                    scores = [sum((qi * ki for qi, ki in zip(q[s], kk[s])), Value(0.0)) * (1 / math.sqrt(hs))
                              for kk in keys[layer]]                     # positions 0..t
                    att = softmax(scores)
                    y += [sum((a * vv[i] for a, vv in zip(att, values[layer])), Value(0.0))
                          for i in range(s.start, s.stop)]
                x = [a + b for a, b in zip(x, linear(y, w[p + "attn.proj.weight"]))]
                hid = [hi.relu() for hi in linear(rms_norm(x), w[p + "mlp.fc.weight"])]
                x = [a + b for a, b in zip(x, linear(hid, w[p + "mlp.proj.weight"]))]
            logits = linear(rms_norm(x), w["head.weight"])
            mx = max(lg.data for lg in logits)
            lse = sum(((lg - mx).exp() for lg in logits), Value(0.0)).log() + mx
            losses.append(lse - logits[target])
        return sum(losses, Value(0.0)) / len(losses)


class ValueAdam:
    """Adam on a list of Values (the same update as `teenygrad.optim.Adam`, one number at a time)."""

    def __init__(self, params: list[Value], lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params, self.lr, (self.b1, self.b2), self.eps = params, lr, betas, eps
        self.m, self.v, self.t = [0.0] * len(params), [0.0] * len(params), 0

    def step(self) -> None:
        self.t += 1
        c1, c2 = 1 - self.b1 ** self.t, 1 - self.b2 ** self.t
        for i, p in enumerate(self.params):
            self.m[i] = self.b1 * self.m[i] + (1 - self.b1) * p.grad
            self.v[i] = self.b2 * self.v[i] + (1 - self.b2) * p.grad * p.grad
            p.data -= self.lr * (self.m[i] / c1) / (math.sqrt(self.v[i] / c2) + self.eps)
            p.grad = 0.0
