"""One optimizer step: teenygrad's fused kernels against the same update written as Tensor ops, and PyTorch.

    python benchmarks/optim.py            # SGD with momentum and Adam on 1M and 16M float32 parameters
    python benchmarks/optim.py --quick    # smoke run: small tensors, few repeats

The fused kernel (`teenygrad/kernels/optim.py`) reads each element of the parameter, its gradient and its state
once and writes the parameter and the state once. Written as Tensor ops (chapter 7's `adam_step`) the same
Adam update is about ten elementwise passes, each reading and writing whole tensors and allocating results.
GB/s counts the bytes the update must move at least: Adam reads p, g, m, v and writes p, m, v (7 x 4 bytes per
float32 element); SGD with momentum reads p, g, v and writes p, v (5 x 4 bytes). Times are the best of several
repeats after a warm-up (see `_timing.py`); PyTorch runs its own optimizer on the same tensor, when installed, in
a process of its own (`_timing.run_in_child`: its thread pool and numba's would fight over the cores in one). The
last lines give the ratios: the fused kernel's time over the Tensor ops' and over PyTorch's.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _timing import best_time, has_module, run_in_child  # noqa: E402  (benchmarks/ is on sys.path when run)

tg = importlib.import_module("teenygrad")
optim = importlib.import_module("teenygrad.optim")


def adam_tensor_ops(p, g, m, v, t, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    """Chapter 7's Adam step in Tensor ops (no fusion): returns new p, m, v."""
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * (m / (1 - b1 ** t)) / ((v / (1 - b2 ** t)).sqrt() + eps), m, v


def sgd_tensor_ops(p, g, v, lr=1e-2, mu=0.9):
    v = mu * v + g
    return p - lr * v, v


UPDATES = (("sgd+momentum", 20), ("adam", 28))  # name, bytes the update moves per float32 element


def data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)


def torch_times(sizes: list[int], repeats: int, budget: float) -> dict[tuple[str, int], float]:
    """In a child process: PyTorch's optimizer step on the same tensors, seconds by (update, elements)."""
    torch = importlib.import_module("torch")
    out = {}
    for n in sizes:
        p0, g0 = data(n)
        for name, _ in UPDATES:
            tp = torch.tensor(p0, requires_grad=True)
            tp.grad = torch.tensor(g0)
            topt = (torch.optim.SGD([tp], lr=1e-2, momentum=0.9) if name == "sgd+momentum"
                    else torch.optim.Adam([tp], lr=1e-3))
            out[name, n] = best_time(topt.step, repeats, budget)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    tg.tune()  # the settings a training script asks for (teenygrad.tuning)
    sizes = [1 << 16] if args.quick else [1 << 20, 1 << 24]
    repeats, budget = (3, 2.0) if args.quick else (10, 20.0)
    theirs = run_in_child(torch_times, sizes, repeats, budget) if has_module("torch") else {}
    print(f"{'update':<12} {'elements':>10} {'fused kernel':>14} {'Tensor ops':>12} {'PyTorch':>10}   GB/s fused")
    ratios = {}
    for n in sizes:
        p0, g0 = data(n)
        for name, bytes_per in UPDATES:
            p = tg.tensor(p0).requires_grad_()
            p.grad = tg.tensor(g0)
            opt = optim.SGD([p], lr=1e-2, momentum=0.9) if name == "sgd+momentum" else optim.Adam([p], lr=1e-3)
            fused = best_time(opt.step, repeats, budget)
            P, G, S1, S2 = tg.tensor(p0), tg.tensor(g0), tg.zeros(n), tg.zeros(n)
            with tg.no_grad():
                ops = best_time((lambda: sgd_tensor_ops(P, G, S1)) if name == "sgd+momentum"
                                else (lambda: adam_tensor_ops(P, G, S1, S2, 3)), repeats, budget)
            pt = theirs.get((name, n), float("nan"))
            ratios[name] = (n, fused / ops, fused / pt)
            print(f"{name:<12} {n:>10,} {fused * 1e3:>11.2f} ms {ops * 1e3:>9.2f} ms {pt * 1e3:>7.2f} ms"
                  f"   {bytes_per * n / fused / 1e9:>6.1f}")
    for name, (n, vs_ops, vs_torch) in ratios.items():
        print(f"{name} at {n:,}: fused kernel / Tensor ops time: {vs_ops:.2f}; fused kernel / PyTorch: "
              + (f"{vs_torch:.2f}" if theirs else "skipped (PyTorch is not installed)"))

if __name__ == "__main__":
    main()
