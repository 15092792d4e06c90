"""Compile every kernel a graded notebook may call, so the sandboxes start from a warm numba cache: every op, on
small tensors of each dtype and layout, on both kernel paths. `autograder.caches` runs it once per version of
teenygrad's source.

Trusted code, run in a process of its own outside any sandbox (`python -m autograder.compile_kernels [DTYPE]`)
with NUMBA_CACHE_DIR pointing at the cache being built. It uses teenygrad's public API only. A case an op refuses
(an int64 exp, a shape it rejects) just has nothing to compile; any other error means the API moved, and the
warm-up fails loudly.
"""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np

import teenygrad as tg
from teenygrad import functional as F
from teenygrad import nn, optim
from teenygrad.gpt import GPT, GPTConfig
from teenygrad.kernels.matmul import matmul_reordered

UNARY = ("neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "abs")
BINARY = ("__add__", "__sub__", "__mul__", "__truediv__", "__pow__", "maximum", "__eq__", "__ne__", "__lt__",
          "__le__", "__gt__", "__ge__", "__radd__", "__rsub__")
REFUSALS = (TypeError, ValueError, IndexError, NotImplementedError)  # the op said no: nothing to compile


def attempt(fn: Callable[[], object]) -> None:
    try:
        fn()
    except REFUSALS:
        pass


def elementwise_and_reductions(dt: object) -> None:
    a = tg.randn(3, 4, dtype=dt)
    for x in (a, a.T.T, a[:, ::2], a[::-1], a.T, tg.randn(1, 4, dtype=dt).expand(3, 4)):
        for name in UNARY:
            attempt(lambda: getattr(x.abs() + 1, name)())
        for y in (x, 2.0, tg.randn(4, dtype=dt), tg.randn(3, 1, dtype=dt)):
            for op in BINARY:
                attempt(lambda: getattr(x, op)(y))
        for axis in (None, 0, 1, (0, 1)):
            for reduction in ("sum", "max", "mean", "argmax"):
                attempt(lambda: getattr(x, reduction)(axis=axis))
                attempt(lambda: getattr(x, reduction)(axis=axis, keepdim=True))
        for axis in (0, -1):
            for path in ("serial", "parallel"):  # a language model's rows are many: the parallel path
                with tg.kernels.force_path(path):
                    attempt(lambda: x.softmax(axis))
                    attempt(lambda: x.log_softmax(axis))
        attempt(lambda: x.contiguous())
        attempt(lambda: x.reshape(-1))


def products_and_movement(dt: object) -> None:
    for m, n, k in ((3, 5, 4), (70, 70, 70), (200, 130, 90)):  # below and above the parallel cut
        attempt(lambda: tg.randn(m, k, dtype=dt) @ tg.randn(k, n, dtype=dt))
        attempt(lambda: tg.randn(2, m, k, dtype=dt) @ tg.randn(2, k, n, dtype=dt))
        attempt(lambda: tg.randn(m, k, dtype=dt) @ tg.randn(k, dtype=dt))
    x, y = tg.randn(20, 30, dtype=dt).numpy(), tg.randn(30, 10, dtype=dt).numpy()
    matmul_reordered(x, y, np.empty((20, 10), x.dtype))  # chapter 3's kernel, which exercise 3 times yours against
    a = tg.randn(3, 4, dtype=dt)
    attempt(lambda: a.index_select(0, tg.tensor([0, 2, 1, 2])))
    attempt(lambda: a.gather(1, tg.tensor([[0], [1], [3]])))
    attempt(lambda: tg.cat([a, a], 0))
    attempt(lambda: tg.stack([a, a], 1))
    attempt(lambda: a.to(tg.float64 if dt == tg.float32 else tg.float32))
    attempt(lambda: a.to(tg.int64))
    c = a.clone()
    c[1] = 0.0
    c[:, 1] = tg.randn(3, dtype=dt)


def gradients(dt: object) -> None:
    a = tg.randn(3, 4, dtype=dt)
    w = tg.randn(4, 5, dtype=dt).requires_grad_()
    ((a @ w).relu().softmax(-1).log().sum() + (w * w).mean()).backward()
    tg.cross_entropy(a @ w, tg.tensor([0, 1, 2])).backward()
    t = tg.randn(5, 3, dtype=dt).requires_grad_()  # an embedding's backward (index_add) and gather's, as in ex. 8
    t.index_select(0, tg.tensor([0, 2, 2])).gather(1, tg.tensor([[0], [1], [2]])).sum().backward()


def training(dt: object) -> None:
    a = tg.randn(3, 4, dtype=dt)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.LayerNorm(5), nn.Dropout(0.1), nn.Linear(5, 3)).to(dt)
    for opt in (optim.SGD(model.parameters(), 0.1), optim.SGD(model.parameters(), 0.1, momentum=0.9),
                optim.Adam(model.parameters()), optim.AdamW(model.parameters())):
        opt.zero_grad()
        tg.cross_entropy(model(a), tg.tensor([0, 1, 2])).backward()
        optim.clip_grad_norm(model.parameters(), 0.1)
        opt.step()


def transformer(dt: object) -> None:
    """The fused ops on both kernel paths, the composed attention of exercise 9, and a GPT step."""
    for path in ("serial", "parallel"):
        with tg.kernels.force_path(path):
            x, w = tg.randn(2, 3, 12, dtype=dt).requires_grad_(), tg.randn(12, dtype=dt).requires_grad_()
            (F.layer_norm(x, w, w).sum() + F.rms_norm(x, w).sum() + F.causal_self_attention(x, 2).sum()
             + F.linear(x, tg.randn(5, 12, dtype=dt), w[:5]).sum() + F.gelu(x).sum()).backward()
            (F.gelu(x) * x).sum().backward()  # a contiguous gradient: gelu's vectorised backward
    q = tg.randn(2, 2, 3, 4, dtype=dt).requires_grad_()
    (F.causal_attention(q, q, q).transpose(1, 2).reshape(2, 3, 8).gelu().sum()
     + F.causal_attention(q[:, :, 2:], q, q).sum()).backward()
    if dt != tg.float32:
        return
    for cfg in (GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=2, n_embd=4),
                GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=2, n_embd=4, norm="rms", act="relu",
                          bias=False, norm_weights=False, tie_weights=False)):
        model = GPT(cfg)
        model(tg.tensor([[1, 2, 3]]), tg.tensor([[2, 3, 4]]))[1].backward()
        model.generate([1, 2], 3, temperature=1.0)
        with F.unfused():  # the composed versions chapter 9 times against the fused ones
            model(tg.tensor([[1, 2, 3]]), tg.tensor([[2, 3, 4]]))[1].backward()


def integers() -> None:
    for x in (tg.arange(12).reshape(3, 4), tg.arange(12).reshape(3, 4).T):
        for fn in (lambda: x + x, lambda: x * 2, lambda: x.sum(axis=0), lambda: x.max(axis=1), x.contiguous,
                   lambda: x == x, lambda: x < 5, lambda: x.to(tg.float32), lambda: x.to(tg.float64),
                   lambda: x.index_select(0, tg.tensor([0, 2, 2]))):
            attempt(fn)


def main(dtypes: list[str]) -> None:
    """The warm-up for the named float dtypes ("float32", "float64"; both when none are named). The integer ops
    go with float64, so `autograder.caches` can run the two halves in two processes at once."""
    wrong = set(dtypes) - {"float32", "float64"}
    if wrong:
        raise SystemExit(f"compile_kernels: unknown dtype(s) {sorted(wrong)}; name float32, float64 or nothing (both)")
    for dt in (tg.float32, tg.float64):
        if dtypes and dt.name not in dtypes:
            continue
        elementwise_and_reductions(dt)
        products_and_movement(dt)
        gradients(dt)
        training(dt)
        transformer(dt)
    if not dtypes or "float64" in dtypes:
        integers()


if __name__ == "__main__":
    main(sys.argv[1:])
