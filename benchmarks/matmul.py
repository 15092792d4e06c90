"""Benchmark teenygrad's matmul kernels against numpy's BLAS (Chapter 3's timings and roofline data).

    python benchmarks/matmul.py               # full table, float32, sizes 64 .. 2048 (about 1-2 minutes)
    python benchmarks/matmul.py --quick       # smoke run: small sizes, few repeats
    python benchmarks/matmul.py --json out.json

GFLOPS = 2*M*N*K / seconds, best of several repeats after a warm-up call (so compilation and first-touch
page faults are not timed). The machine may be shared, so the best repeat is the honest number.
Threads: teenygrad's parallel kernels use numba's thread pool, numpy uses OpenBLAS's. Both keep their threads
spinning for a moment after a call, and timed in one process they fight over the cores (on 2 cores the 1024^2
ratio came out 0.51 in one run, 1.12 in the next). So each side is timed in a process of its own
(`_timing.run_in_child`): teenygrad's kernels in one, with OpenBLAS held to one thread there (numpy only computes
the float64 reference in it), then numpy's BLAS in another. Within teenygrad's process the script still pauses
briefly between kernels.
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
from _timing import best_time, numpy_env, run_in_child  # noqa: E402  (benchmarks/ is on sys.path when run)

# Largest size at which each slow kernel is still run (it would take too long beyond).
MAX_SIZE = {"naive": 256, "reordered": 1024, "blocked": 2048}
BATCHED = (48, 64, 32, 64)  # many small products, as in attention: (48, 64, 32) @ (48, 32, 64)


def cpu_name() -> str:
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return name


def operands(size: int) -> tuple[np.ndarray, np.ndarray]:
    """The same float32 operands in every process (seeded by size)."""
    rng = np.random.default_rng(size)
    return (rng.standard_normal((size, size)).astype(np.float32),
            rng.standard_normal((size, size)).astype(np.float32))


def batched_operands() -> tuple[np.ndarray, np.ndarray]:
    batch, m, k, n = BATCHED
    rng = np.random.default_rng(1)
    return (rng.standard_normal((batch, m, k)).astype(np.float32),
            rng.standard_normal((batch, k, n)).astype(np.float32))


def measure(side: str, sizes: list[int], repeats: int, budget: float, pause: float) -> dict:
    """In a child process: GFLOPS of each kernel of `side` ("teenygrad": every kernel and the default;
    "numpy": np.matmul) at each size, and the batched product's seconds. Checks every result."""
    if side == "teenygrad":
        # the module (`import teenygrad.kernels.matmul` would give the function that teenygrad.kernels re-exports)
        mm = importlib.import_module("teenygrad.kernels.matmul")
        fns = {**mm.KERNELS, "default": mm.matmul}
        info = {"threads": mm.num_threads(), "default": mm.DEFAULT, "kernels": list(mm.KERNELS)}
        batched = mm.matmul_batched
    else:
        fns = {"numpy": lambda a, b, out: np.matmul(a, b, out=out)}
        info = {}
        batched = fns["numpy"]
    gflops: dict[str, dict[int, float]] = {name: {} for name in fns}
    for size in sizes:
        a, b = operands(size)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        for name, fn in fns.items():
            if size > MAX_SIZE.get(name, 1 << 30):
                continue
            out = np.empty((size, size), np.float32)
            time.sleep(pause)
            t = best_time(lambda: fn(a, b, out), repeats, budget)
            err = float(np.max(np.abs(out - ref))) / max(1.0, float(np.max(np.abs(ref))))
            assert err < 1e-3, f"{name} wrong at {size}: relative error {err}"
            gflops[name][size] = 2.0 * size**3 / t / 1e9
    a, b = batched_operands()
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), np.float32)
    time.sleep(pause)
    t_batched = best_time(lambda: batched(a, b, out), repeats * 5, budget)
    assert np.allclose(out, np.einsum("bik,bkj->bij", a.astype(np.float64), b.astype(np.float64)),
                       rtol=1e-4, atol=1e-4)
    return {"gflops": gflops, "batched_seconds": t_batched, **info}


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

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    if load > 0.5:
        print(f"warning: load average {load:.1f} before starting: other work is running, and threaded "
              f"kernels (teenygrad's parallel ones and numpy's) slow down badly when cores are busy", flush=True)
    # teenygrad's process: OpenBLAS on one thread (numpy there only computes the references), so no BLAS pool
    tg_env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    tg_side = run_in_child(measure, "teenygrad", sizes, repeats, budget, pause, env=tg_env)
    time.sleep(pause)
    np_env, note = numpy_env()
    np_side = run_in_child(measure, "numpy", sizes, repeats, budget, pause, env=np_env)
    cpu = f"{cpu_name()}, {os.cpu_count()} logical CPUs, numba threads: {tg_side['threads']}"
    print(f"CPU: {cpu}")
    print(f"numpy {np.__version__}, dtype float32, default kernel: matmul() -> {tg_side['default']!r}; "
          f"teenygrad and numpy each timed in a process of its own")
    if note:
        print(note)
    print("GFLOPS (2*N^3 / best time); '-' = skipped (too slow at this size)\n")
    names = tg_side["kernels"] + ["default", "numpy"]
    gflops = {**tg_side["gflops"], **np_side["gflops"]}
    header = f"{'N':>6} " + " ".join(f"{n:>10}" for n in names) + f" {'default/np':>11}"
    print(header)
    print("-" * len(header))
    results = {"cpu": cpu, "dtype": "float32", "sizes": sizes, "gflops": gflops, "ratio_default_numpy": {}}
    for size in sizes:
        row = [f"{gflops[name][size]:10.1f}" if size in gflops[name] else f"{'-':>10}" for name in names]
        ratio = gflops["default"][size] / gflops["numpy"][size]
        results["ratio_default_numpy"][size] = ratio
        print(f"{size:>6} " + " ".join(row) + f" {ratio:11.2f}")

    batch, m, k, n = BATCHED
    flops = 2.0 * batch * m * n * k
    t_tg, t_np = tg_side["batched_seconds"], np_side["batched_seconds"]
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
