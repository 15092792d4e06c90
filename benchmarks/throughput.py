"""Memory-bound kernels against numpy, and the two limits of this machine (Chapter 3's roofline data).

    python benchmarks/throughput.py               # elementwise and reduction GB/s, bandwidth, peak (~30 s)
    python benchmarks/throughput.py --quick       # smoke run: small arrays, few repeats
    python benchmarks/throughput.py --json out.json

Three tables:

1. Elementwise ops (add, exp, relu) through teenygrad's Tensor and through numpy, on 1M and 16M float32
   elements. GB/s counts the bytes the op must move at least: every input read once, the output written
   once (an add of n float32 moves 12n bytes). Allocating the output is part of the op in both libraries.
2. Reductions (sum of everything, sum over axis 0 and over axis 1) of a 4096 x 4096 float32 matrix
   (1024 x 1024 with --quick): the bytes read.
3. This machine's limits, the two lines of a roofline plot:
   * memory bandwidth: the best of a numpy copy and a numba "triad" a[i] = b[i] + s*c[i] on arrays far
     larger than the caches (reads plus writes, the STREAM benchmark's counting);
   * peak float32 FLOPS: a numba kernel doing nothing but fused multiply-adds on many independent
     accumulators held in vector registers, on every core. Real kernels reach a fraction of it.

Times are the best of several repeats after a warm-up call (compilation and first-touch page faults are not
timed): the machine may be shared, and the best repeat is the honest estimate of what the code costs.
teenygrad and numpy are timed in one process here: numpy's side is its ufuncs and sums, which run on the calling
thread (no BLAS, no thread pool of numpy's to fight numba's; benchmarks/matmul.py, which times BLAS, uses two
processes). The last line gives the geometric mean of the teenygrad/numpy speed ratios.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

import numba
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path when run)

tg = importlib.import_module("teenygrad")
_matmul = importlib.import_module("teenygrad.kernels.matmul")
local_array = _matmul.local_array


# ---- the machine's limits ------------------------------------------------------------------------------

@numba.njit(cache=True, parallel=True)
def _triad(a, b, c, s):
    """a = b + s*c, shared among threads (each element is written by exactly one of them)."""
    for i in numba.prange(a.shape[0]):
        a[i] = b[i] + s * c[i]


# The micro-kernel's block of float32 accumulators, MR x NR, sized for this machine's vector unit (teenygrad/
# kernels/cpu.py; on AVX-512 6 x 32, 12 registers). A global, so numba compiles it in; its disk cache is keyed on
# the target CPU, which determines the shape.
CHAIN_ROWS, CHAIN_WIDTH = _matmul.MR, _matmul.NR
FLOPS_PER_ITERATION = 2 * CHAIN_ROWS * CHAIN_WIDTH  # a multiply-add is 2 flops


@numba.njit(cache=True, fastmath=True)
def _fma_loop(n, x, y):
    """n rounds of acc = acc*x + y on 6 x CHAIN_WIDTH accumulators kept in vector registers.

    Each accumulator is a dependency chain (a multiply-add must wait ~4 cycles for the previous one), so
    many independent chains are needed to keep the FMA units busy every cycle (on AVX-512: 12 vectors of 16).
    The accumulators are stack arrays (`local_array`) and the CHAIN_WIDTH-wide loop is unrolled, so they live in
    registers, exactly as in teenygrad's matmul micro-kernel, but with no loads at all. The result is
    returned, so the compiler cannot drop the work; x is slightly below 1, so nothing overflows."""
    c0 = local_array(CHAIN_WIDTH, np.float32)
    c1 = local_array(CHAIN_WIDTH, np.float32)
    c2 = local_array(CHAIN_WIDTH, np.float32)
    c3 = local_array(CHAIN_WIDTH, np.float32)
    c4 = local_array(CHAIN_WIDTH, np.float32)
    c5 = local_array(CHAIN_WIDTH, np.float32)
    for j in range(CHAIN_WIDTH):
        c0[j], c1[j], c2[j], c3[j], c4[j], c5[j] = j, j + 1, j + 2, j + 3, j + 4, j + 5
    for _ in range(n):
        for j in range(CHAIN_WIDTH):
            c0[j] = c0[j] * x + y
            c1[j] = c1[j] * x + y
            c2[j] = c2[j] * x + y
            c3[j] = c3[j] * x + y
            c4[j] = c4[j] * x + y
            c5[j] = c5[j] * x + y
    total = np.float32(0.0)
    for j in range(CHAIN_WIDTH):
        total += c0[j] + c1[j] + c2[j] + c3[j] + c4[j] + c5[j]
    return total


@numba.njit(cache=True, parallel=True)
def _fma_parallel(n, threads, x, y):
    out = np.zeros(threads, np.float32)
    for t in numba.prange(threads):
        out[t] = _fma_loop(n, x, y)
    return out


def peak_gflops(threads: int, n: int = 2_000_000, repeats: int = 5) -> float:
    """Measured float32 FMA throughput on `threads` threads (2 flops per multiply-add)."""
    x, y = np.float32(0.999), np.float32(0.001)
    t = best_time(lambda: _fma_parallel(n, threads, x, y), repeats, 5.0)
    return FLOPS_PER_ITERATION * n * threads / t / 1e9


def bandwidth_gbs(n: int, repeats: int = 5) -> dict:
    """GB/s of a numpy copy (read n + write n float32) and a numba triad (read 2n + write n float32)."""
    b = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    c = b[::-1].copy()
    a = np.empty_like(b)
    t_copy = best_time(lambda: np.copyto(a, b), repeats, 5.0)
    t_triad = best_time(lambda: _triad(a, b, c, np.float32(3.0)), repeats, 5.0)
    copy, triad = 8.0 * n / t_copy / 1e9, 12.0 * n / t_triad / 1e9
    return {"copy": copy, "triad": triad, "best": max(copy, triad)}


# ---- elementwise and reductions ------------------------------------------------------------------------

ELEMENTWISE = {  # name -> (teenygrad op, numpy op, bytes moved per element of float32)
    "add": (lambda x, y: x + y, lambda x, y: x + y, 12),
    "exp": (lambda x, y: x.exp(), lambda x, y: np.exp(x), 8),
    "relu": (lambda x, y: x.relu(), lambda x, y: np.maximum(x, 0), 8),
}
REDUCTIONS = {  # name -> (teenygrad op, numpy op)
    "sum": (lambda t: t.sum(), lambda a: a.sum()),
    "sum(axis=0)": (lambda t: t.sum(axis=0), lambda a: a.sum(axis=0)),
    "sum(axis=1)": (lambda t: t.sum(axis=1), lambda a: a.sum(axis=1)),
}


def elementwise(sizes: list[int], repeats: int, budget: float) -> dict:
    rng = np.random.default_rng(0)
    results = {}
    for n in sizes:
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        tx, ty = tg.Tensor(x), tg.Tensor(y)
        for name, (tg_op, np_op, per) in ELEMENTWISE.items():
            assert np.allclose(tg_op(tx, ty).numpy(), np_op(x, y), rtol=1e-5, atol=1e-6)
            t_tg = best_time(lambda: tg_op(tx, ty), repeats, budget)
            t_np = best_time(lambda: np_op(x, y), repeats, budget)
            results[f"{name} {n}"] = {"op": name, "n": n, "teenygrad_gbs": per * n / t_tg / 1e9,
                                      "numpy_gbs": per * n / t_np / 1e9, "ratio": t_np / t_tg}
    return results


def reductions(side: int, repeats: int, budget: float) -> dict:
    a = np.random.default_rng(1).standard_normal((side, side)).astype(np.float32)
    t = tg.Tensor(a)
    results = {}
    for name, (tg_op, np_op) in REDUCTIONS.items():
        assert np.allclose(tg_op(t).numpy(), np_op(a.astype(np.float64)), rtol=1e-4, atol=1e-2)
        t_tg = best_time(lambda: tg_op(t), repeats, budget)
        t_np = best_time(lambda: np_op(a), repeats, budget)
        results[name] = {"op": name, "shape": [side, side], "teenygrad_gbs": 4 * a.size / t_tg / 1e9,
                         "numpy_gbs": 4 * a.size / t_np / 1e9, "ratio": t_np / t_tg}
    return results


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small arrays, few repeats (smoke test)")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    args = ap.parse_args(argv)
    sizes, side, big, repeats, budget = ([2**20, 2**24], 4096, 2**26, 10, 2.0) if not args.quick else \
        ([2**16, 2**20], 1024, 2**22, 3, 0.2)
    threads = numba.get_num_threads()

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > 0.5:
        print(f"warning: load average {load:.1f}: other work is running, so these figures are low")
    print(f"{os.cpu_count()} logical CPUs, numba threads: {threads}, numpy {np.__version__}, float32\n")

    results = {"threads": threads, "elementwise": elementwise(sizes, repeats, budget)}
    print(f"{'elementwise':>14} {'teenygrad GB/s':>15} {'numpy GB/s':>11} {'tg/numpy':>9}")
    for key, r in results["elementwise"].items():
        print(f"{key:>14} {r['teenygrad_gbs']:15.1f} {r['numpy_gbs']:11.1f} {r['ratio']:9.2f}", flush=True)

    results["reductions"] = reductions(side, repeats, budget)
    print(f"\n{f'{side}x{side}':>14} {'teenygrad GB/s':>15} {'numpy GB/s':>11} {'tg/numpy':>9}")
    for key, r in results["reductions"].items():
        print(f"{key:>14} {r['teenygrad_gbs']:15.1f} {r['numpy_gbs']:11.1f} {r['ratio']:9.2f}", flush=True)

    ew = [r["ratio"] for r in results["elementwise"].values()]
    red = [r["ratio"] for r in results["reductions"].values()]
    results["geomean_ratio"] = {"elementwise": float(np.exp(np.mean(np.log(ew)))),
                                "reductions": float(np.exp(np.mean(np.log(red))))}

    results["bandwidth_gbs"] = bandwidth_gbs(big, repeats=5 if not args.quick else 2)
    results["peak_gflops"] = peak_gflops(threads, n=2_000_000 if not args.quick else 200_000)
    results["peak_gflops_one_thread"] = peak_gflops(1, n=2_000_000 if not args.quick else 200_000)
    bw = results["bandwidth_gbs"]
    print(f"\nmemory bandwidth ({4 * big / 2**20:.0f} MiB arrays): copy {bw['copy']:.1f} GB/s, "
          f"triad {bw['triad']:.1f} GB/s")
    print(f"peak float32 FMA throughput: {results['peak_gflops']:.0f} GFLOPS on {threads} threads, "
          f"{results['peak_gflops_one_thread']:.0f} on one")
    print(f"ridge point (peak / bandwidth): {results['peak_gflops'] / bw['best']:.1f} FLOP/byte")
    print(f"teenygrad/numpy speed, geometric mean: elementwise {results['geomean_ratio']['elementwise']:.2f}, "
          f"reductions {results['geomean_ratio']['reductions']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"wrote {args.json}")
    return results


if __name__ == "__main__":
    main()
