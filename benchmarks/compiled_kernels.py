"""Generated kernels (chapter 10's compiler) against chapter 9's hand-written ones, in one run.

    python benchmarks/compiled_kernels.py
    python benchmarks/compiled_kernels.py --quick    # a smoke run: the small model's shapes, all threads, few calls

Each graph is built by hand from `teenygrad.compiler.ir` primitives, compiled with `teenygrad.compiler.compile_graph`
(where `tg.compile`'s traces meet the back end), and timed against
the hand-written kernel doing the same work (best of several calls, alternating, after a warm-up):
  - the attention softmax of the Shakespeare GPT (batch 12, 4 heads, context 64) and of the wider model
    (batch 8, 6 heads, context 128), rows of the (B, nh, T, T) scores, against `kernels.softmax`;
    also the compiler's scale + causal mask + softmax in one kernel (the hand kernel gets pre-masked scores);
  - layer norm of (B*T, C) activations against `kernels.fused.layer_norm`;
  - a linear layer with bias + GELU, (B*T, C) @ (C, 4C), against `kernels.matmul.matmul` + `fused.add_bias`
    + the GELU kernel `kernels.elementwise` uses in eager teenygrad.
A ratio below 1 means the generated kernel is faster. Each comparison runs on all threads, then on one (on a
machine busy with other work, a parallel kernel waits for a free core: the one-thread ratio is the steadier).
The script prints what it measured, whatever it is.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from teenygrad import compiler  # noqa: E402
from teenygrad.compiler import ir  # noqa: E402
from teenygrad.kernels import elementwise, fused  # noqa: E402
from teenygrad.kernels import softmax as hand_softmax  # noqa: E402
from teenygrad.kernels.layout import ints  # noqa: E402
from teenygrad.kernels.matmul import matmul  # noqa: E402

from _timing import best_time  # noqa: E402


def c(v, like):
    return ir.const(v, like.dtype, like.shape)


def softmax(x):
    last = len(x.shape) - 1
    e = ir.unary("exp", ir.binary("sub", x, ir.expand(ir.reduce("max", x, [last]), x.shape)))
    return ir.binary("div", e, ir.expand(ir.reduce("sum", e, [last]), x.shape))


def layer_norm(x, w, b, eps=1e-5):
    R, C = x.shape
    n = ir.const(float(C), x.dtype, (R, 1))
    d = ir.binary("sub", x, ir.expand(ir.binary("div", ir.reduce("sum", x, [1]), n), x.shape))
    var = ir.binary("div", ir.reduce("sum", ir.binary("mul", d, d), [1]), n)
    rstd = ir.unary("recip", ir.unary("sqrt", ir.binary("add", var, ir.const(eps, x.dtype, (R, 1)))))
    row = lambda v: ir.expand(ir.reshape(v, (1, C)), x.shape)  # noqa: E731
    return ir.binary("add", ir.binary("mul", ir.binary("mul", d, ir.expand(rstd, x.shape)), row(w)), row(b))


def gelu(x):
    cube = ir.binary("mul", ir.binary("mul", x, x), x)
    inner = ir.binary("mul", c(math.sqrt(2 / math.pi), x), ir.binary("add", x, ir.binary("mul", c(0.044715, x), cube)))
    return ir.binary("mul", ir.binary("mul", c(0.5, x), x), ir.binary("add", c(1.0, x), ir.unary("tanh", inner)))


def compile_graph(outputs):
    return compiler.compile_graph(outputs, [])


def ratio(quick: bool, name: str, compiled, hand) -> None:
    compiled(), hand()
    rounds, repeats, budget = (1, 5, 0.2) if quick else (3, 30, 1.0)
    for threads in (numba.config.NUMBA_NUM_THREADS,) if quick else (numba.config.NUMBA_NUM_THREADS, 1):
        numba.set_num_threads(threads)
        tc, th = [], []
        for _ in range(rounds):  # alternate, so a busy machine slows both alike
            tc.append(best_time(compiled, repeats, budget))
            th.append(best_time(hand, repeats, budget))
        c_, h_ = min(tc), min(th)
        print(f"{name:<50} {threads} thr  compiled {c_ * 1e6:8.1f} us   hand {h_ * 1e6:8.1f} us   ratio {c_ / h_:.2f}")
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the small model's shapes only, on all threads, few calls")
    quick = ap.parse_args().quick
    rng = np.random.default_rng(0)
    dt = "float32"
    for B, nh, T, C in ((12, 4, 64, 128),) if quick else ((12, 4, 64, 128), (8, 6, 128, 384)):
        s = ir.Buffer("scores", (B, nh, T, T), dt, rng.standard_normal((B, nh, T, T)).astype(dt))
        prog = compile_graph([softmax(ir.load(s))])
        out = np.empty(s.array.size, dt)
        flat = s.array.reshape(-1)
        ratio(quick, f"attention softmax ({B},{nh},{T},{T})", lambda: prog([s.array]),
              lambda: hand_softmax.softmax(flat, 0, B * nh * T, T, T, 1, out))
        x = ir.load(s)
        scaled = ir.binary("mul", x, c(1 / math.sqrt(C // nh), x))
        mask = ir.binary("lt", ir.arange(s.shape, 2), ir.arange(s.shape, 3))
        masked = softmax(ir.where(mask, ir.const(float("-inf"), dt, s.shape), scaled))
        prog2 = compile_graph([masked])
        ratio(quick, f"  scale + causal mask + softmax ({B},{nh},{T},{T})", lambda: prog2([s.array]),
              lambda: hand_softmax.softmax(flat, 0, B * nh * T, T, T, 1, out))

        R = B * T
        X = ir.Buffer("x", (R, C), dt, rng.standard_normal((R, C)).astype(dt))
        W = ir.Buffer("w", (C,), dt, rng.standard_normal(C).astype(dt))
        Bb = ir.Buffer("b", (C,), dt, rng.standard_normal(C).astype(dt))
        prog3 = compile_graph([layer_norm(ir.load(X), ir.load(W), ir.load(Bb))])
        y, mean, rstd = np.empty((R, C), dt), np.empty(R, dt), np.empty(R, dt)
        ratio(quick, f"layer norm ({R},{C})", lambda: prog3([X.array, W.array, Bb.array]),
              lambda: fused.layer_norm(X.array, W.array, Bb.array, 1e-5, y, mean, rstd))

        W1 = ir.Buffer("w1", (4 * C, C), dt, (rng.standard_normal((4 * C, C)) / math.sqrt(C)).astype(dt))
        B1 = ir.Buffer("b1", (4 * C,), dt, rng.standard_normal(4 * C).astype(dt))
        h = ir.matmul(ir.load(X), ir.permute(ir.load(W1), (1, 0)))
        h = gelu(ir.binary("add", h, ir.expand(ir.reshape(ir.load(B1), (1, 4 * C)), (R, 4 * C))))
        prog4 = compile_graph([h])
        hh, gg = np.empty((R, 4 * C), dt), np.empty(R * 4 * C, dt)
        shape, strides = ints((R * 4 * C,)), ints((1,))

        def hand_linear():
            matmul(X.array, W1.array.T, hh)
            fused.add_bias(hh, B1.array)
            elementwise.gelu(shape, hh.reshape(-1), strides, 0, gg)
        ratio(quick, f"linear + bias + GELU ({R},{C})@({C},{4 * C})", lambda: prog4([X.array, W1.array, B1.array]),
              hand_linear)


if __name__ == "__main__":
    main()
