"""Chapter 5's benchmark: training the digits MLP on Values, interpreted vs compiled to a tape.

    python benchmarks/scalar_autograd.py              # a few seconds
    python benchmarks/scalar_autograd.py --quick      # smoke run
    python benchmarks/scalar_autograd.py --json out.json

One model, 64 -> 16 (tanh) -> 10, softmax cross-entropy, per-example SGD, the same initial weights and
the same examples for every method:
- values:    micrograd's way: build the Value graph for each example, backward, update in Python.
- tape:      the graph compiled once; per example set_inputs, forward, backward, sgd_step (4 kernel calls).
- tape.fit:  the same loop over a whole epoch inside one kernel call.
- fused, fused.fit: the same two on the fused tape (teenygrad.tape_fuse: each neuron's multiply-adds one DOT).
Each method's first examples' losses must equal the Value graph's (to 1e-9), or the script stops.
The issue's target: fused.fit at least 1000x the Value graph's examples per second.
Examples per second is the best of several timed chunks, in CPU time of this thread (the machine may be
shared: the best chunk is the least disturbed). The methods take turns, round by round: a chunk of 10 examples
on the Value graph (thousands of times slower, so it gets fewer examples), then an epoch of each tape method.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Iterator

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from teenygrad import tape as T  # noqa: E402
from teenygrad import tape_fuse  # noqa: E402
from teenygrad.datasets import load_digits  # noqa: E402
from teenygrad.value import Value  # noqa: E402
from teenygrad.value_nn import MLP, cross_entropy, sgd_step  # noqa: E402

SIZES, LR, SEED = [16, 10], 0.05, 0
# CPU time of this thread, not wall time: every method is single-threaded, so on a quiet machine the two agree,
# and on a shared one (other jobs preempting us) CPU time is the steadier estimate of that quiet-machine figure.
clock = time.thread_time


def data() -> tuple[np.ndarray, np.ndarray]:
    """Rows of 64 pixels in [0, 1] followed by the one-hot target: what the tape's inputs are fed."""
    X, y = load_digits()
    return np.concatenate([X / 16.0, np.eye(10)[y]], axis=1), y


def values_train(rows: np.ndarray, y: np.ndarray, chunk: int) -> Iterator[tuple[list[float], float]]:
    """(losses, seconds) for each chunk of examples in turn, rebuilding the graph for every example."""
    model = MLP(64, SIZES, seed=SEED)
    params = model.parameters()
    for start in range(0, len(rows), chunk):
        losses, t0 = [], clock()
        for row, t in zip(rows[start:start + chunk], y[start:start + chunk]):
            loss = cross_entropy(model(row[:64].tolist()), int(t))
            loss.backward()
            sgd_step(params, LR)
            losses.append(loss.data)
        yield losses, clock() - t0


def compile_tape(fuse: bool = False) -> tuple[T.Tape, float]:
    t0 = clock()
    model = MLP(64, SIZES, seed=SEED)
    xs, ts = [Value(0.0) for _ in range(64)], [Value(0.0) for _ in range(10)]
    tape = T.compile(cross_entropy(model(xs), ts), inputs=xs + ts, params=model.parameters())
    return (tape_fuse.fuse(tape) if fuse else tape), clock() - t0


def tape_train(rows: np.ndarray, fuse: bool) -> Iterator[tuple[list[float], float]]:
    """(losses, seconds) for each epoch in turn, four calls per example."""
    tape, _ = compile_tape(fuse)
    while True:
        losses, t0 = [], clock()
        for row in rows:
            tape.set_inputs(row)
            losses.append(tape.forward())
            tape.backward()
            tape.sgd_step(LR)
        yield losses, clock() - t0


def fit_train(rows: np.ndarray, fuse: bool) -> Iterator[tuple[list[float], float]]:
    """(losses, seconds) for each epoch in turn, one fit call per epoch."""
    tape, _ = compile_tape(fuse)
    while True:
        t0 = clock()
        losses = tape.fit(rows, LR)
        yield losses.tolist(), clock() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer examples and repeats")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--value-examples", type=int, default=None, help="examples for the Value graph (default 200)")
    args = parser.parse_args()
    chunk = 10
    n_values = max(chunk, (args.value_examples or (20 if args.quick else 200)) // chunk * chunk)
    rounds = n_values // chunk

    rows, y = data()
    tape, compile_s = compile_tape()
    fused, fuse_s = compile_tape(fuse=True)
    for t in (tape, fused):  # warm up the kernels (numba loads them from its disk cache, or compiles them)
        t.fit(rows[:2], LR)
        t.set_inputs(rows[0]), t.forward(), t.backward(), t.sgd_step(LR)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0

    # in alternation: each round times a chunk of the Value graph's examples, then an epoch of each tape method,
    # so a burst of load elsewhere on the machine slows all of them alike, not just whichever runs then
    methods = {"values": values_train(rows[:n_values], y[:n_values], chunk),
               "tape": tape_train(rows, False), "tape.fit": fit_train(rows, False),
               "fused": tape_train(rows, True), "fused.fit": fit_train(rows, True)}
    runs: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in methods}
    for _ in range(rounds):
        for k, steps in methods.items():
            losses, seconds = next(steps)
            runs[k][0].extend(losses)
            runs[k][1].append(seconds)
    v_losses, v_times = runs.pop("values")
    check = min(n_values, 20)
    for name, (losses, _) in runs.items():
        err = max(abs(a - b) for a, b in zip(losses[:n_values], v_losses))
        if err > 1e-9:
            sys.exit(f"{name}: losses differ from the Value graph's by {err:.3g} (> 1e-9) on the first "
                     f"{n_values} examples; not timing a wrong answer")

    n = len(rows)
    rate = {"values": chunk / min(v_times), **{k: n / min(times) for k, (_, times) in runs.items()}}
    results = {
        "model": f"64 -> {' -> '.join(map(str, SIZES))}, tanh, softmax cross-entropy, per-example SGD lr={LR}",
        "tape_slots": len(tape), "tape_ops": len(tape) - tape.n_leaves, "params": tape.n_params,
        "fused_slots": len(fused), "fused_ops": len(fused) - fused.n_leaves, "fused_products": len(fused.dot_a),
        "compile_seconds": compile_s, "fuse_compile_seconds": fuse_s, "value_examples": n_values,
        "tape_examples": n * rounds, "rounds": rounds,
        "examples_per_second": rate,
        "speedup_vs_values": {k: rate[k] / rate["values"] for k in rate},
        "losses_checked": n_values, "first_losses": v_losses[:check],
        "epoch_mean_loss": {"tape": [float(np.mean(runs["tape"][0][e * n:(e + 1) * n])) for e in range(rounds)]},
        "machine": {"cpu": platform.processor() or platform.machine(), "load_average": load,
                    "python": platform.python_version()},
    }

    print(f"digits MLP {results['model']}")
    print(f"tape: {results['tape_slots']} slots ({results['params']} params, {results['tape_ops']} ops), "
          f"compiled in {compile_s * 1e3:.0f} ms; fused: {results['fused_slots']} slots ({results['fused_ops']} ops, "
          f"{results['fused_products']} products in DOTs), {fuse_s * 1e3:.0f} ms; losses equal to the Value "
          f"graph's on the first {n_values} examples (1e-9)")
    print(f"{'method':<10} {'examples/s':>12} {'us/example':>12} {'vs values':>10}")
    for k in rate:
        print(f"{k:<10} {rate[k]:>12,.0f} {1e6 / rate[k]:>12.2f} {rate[k] / rate['values']:>9,.0f}x")
    best = max(rate, key=rate.get)
    print(f"target (issue 5): compiled >= 1000x the Value graph per example: {best} "
          f"{rate[best] / rate['values']:,.0f}x, {'met' if rate[best] >= 1000 * rate['values'] else 'NOT met'}")
    print("mean loss per tape epoch: " + ", ".join(f"{v:.3f}" for v in results["epoch_mean_loss"]["tape"][:5])
          + (", ..." if rounds > 5 else ""))
    if load > 1.5:
        print(f"note: load average {load:.1f} at start; the machine is shared, figures may be low")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
