"""Benchmark teenygrad's matmul kernels against numpy's BLAS (Chapter 3's timings and roofline data).

    python benchmarks/matmul.py               # full table, float32, sizes 64 .. 2048 (about 1-2 minutes)
    python benchmarks/matmul.py --quick       # smoke run: small sizes, few repeats
    python benchmarks/matmul.py --json out.json

GFLOPS = 2*M*N*K / seconds, best of several repeats after a warm-up call (so compilation and first-touch
page faults are not timed). The machine may be shared, so the best repeat is the honest number.
Threads: teenygrad's parallel kernels use numba's thread pool, numpy uses OpenBLAS's. Both keep their
threads spinning for a moment after a call, which would slow down whichever library runs next, so
the script pauses briefly between measurements of different kernels.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from _timing import best_time  # noqa: E402  (benchmarks/ is on sys.path when run)

mm = importlib.import_module("teenygrad.kernels.matmul")

# Largest size at which each slow kernel is still run (it would take too long beyond).
MAX_SIZE = {"naive": 256, "reordered": 1024, "blocked": 2048}


def cpu_info() -> str:
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{name}, {os.cpu_count()} logical CPUs, numba threads: {mm._num_threads()}"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, few repeats (smoke test)")
    ap.add_argument("--json", metavar="PATH", help="write the results as JSON to PATH")
    ap.add_argument("--sizes", help="comma-separated square sizes (default 64,...,2048)")
    args = ap.parse_args(argv)

    sizes = [64, 128, 256, 512, 1024, 2048] if not args.quick else [32, 64, 128]
    if args.sizes:
        sizes = [int(s) for s in args.sizes.split(",")]
    repeats, budget, pause = (20, 1.5, 0.2) if not args.quick else (3, 0.2, 0.0)
    dtype = np.float32
    rng = np.random.default_rng(0)
    names = list(mm.KERNELS) + ["default", "numpy"]
    fns = dict(mm.KERNELS)
    fns["default"] = mm.matmul
    fns["numpy"] = lambda a, b, out: np.matmul(a, b, out=out)

    print(f"CPU: {cpu_info()}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > 0.5:
        print(f"warning: load average {load:.1f} before starting: other work is running, and threaded "
              f"kernels (teenygrad's parallel ones and numpy's) slow down badly when cores are busy")
    print(f"numpy {np.__version__}, dtype float32, default kernel: matmul() -> {mm.DEFAULT!r}")
    print("GFLOPS (2*N^3 / best time); '-' = skipped (too slow at this size)\n")
    header = f"{'N':>6} " + " ".join(f"{n:>10}" for n in names) + f" {'default/np':>11}"
    print(header)
    print("-" * len(header))

    results = {"cpu": cpu_info(), "dtype": "float32", "sizes": sizes, "gflops": {n: {} for n in names},
               "ratio_default_numpy": {}}
    for size in sizes:
        a = rng.standard_normal((size, size)).astype(dtype)
        b = rng.standard_normal((size, size)).astype(dtype)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        row = []
        for name in names:
            if size > MAX_SIZE.get(name, 1 << 30):
                row.append(f"{'-':>10}")
                continue
            out = np.empty((size, size), dtype)
            time.sleep(pause)
            t = best_time(lambda: fns[name](a, b, out), repeats, budget)
            err = float(np.max(np.abs(out - ref))) / max(1.0, float(np.max(np.abs(ref))))
            assert err < 1e-3, f"{name} wrong at {size}: relative error {err}"
            gflops = 2.0 * size**3 / t / 1e9
            results["gflops"][name][size] = gflops
            row.append(f"{gflops:10.1f}")
        ratio = results["gflops"]["default"][size] / results["gflops"]["numpy"][size]
        results["ratio_default_numpy"][size] = ratio
        print(f"{size:>6} " + " ".join(row) + f" {ratio:11.2f}", flush=True)

    # Many small products, as in attention: (48, 64, 32) @ (48, 32, 64).
    batch, m, k, n = (48, 64, 32, 64)
    a = rng.standard_normal((batch, m, k)).astype(dtype)
    b = rng.standard_normal((batch, k, n)).astype(dtype)
    out = np.empty((batch, m, n), dtype)
    flops = 2.0 * batch * m * n * k
    time.sleep(pause)
    t_tg = best_time(lambda: mm.matmul_batched(a, b, out), repeats * 5, budget)
    assert np.allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    time.sleep(pause)
    t_np = best_time(lambda: np.matmul(a, b, out=out), repeats * 5, budget)
    results["batched"] = {"shape": [batch, m, k, n], "teenygrad_gflops": flops / t_tg / 1e9,
                          "numpy_gflops": flops / t_np / 1e9, "ratio": t_np / t_tg}
    print(f"\nbatched ({batch}, {m}, {k}) @ ({batch}, {k}, {n}) float32: teenygrad {flops / t_tg / 1e9:.1f} "
          f"GFLOPS ({t_tg * 1e6:.0f} us), numpy {flops / t_np / 1e9:.1f} GFLOPS ({t_np * 1e6:.0f} us), "
          f"teenygrad/numpy: {t_np / t_tg:.2f}")

    key = 1024 if 1024 in results["ratio_default_numpy"] else sizes[-1]
    print(f"default/numpy at {key} float32: {results['ratio_default_numpy'][key]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"wrote {args.json}")
    return results


if __name__ == "__main__":
    main()
