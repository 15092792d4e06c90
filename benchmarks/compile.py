"""Chapter 10's compiler on chapter 9's training step: teenygrad compiled vs teenygrad eager vs PyTorch eager.

    python benchmarks/compile.py            # both models, and the cold and warm compile times (several minutes)
    python benchmarks/compile.py --quick    # the small model only, 5 steps (or --steps), no compile-time processes
    python benchmarks/compile.py --smoke    # the smallest form (what the test suite runs): a tiny model, 3 steps
    python benchmarks/compile.py --steps 300 # more timed steps per model (default: 150 small, 30 wide)

The step is chapter 9's: forward, zero_grad, backward, the gradient's norm clipped at 1.0, AdamW (betas 0.9 and
0.99, weight decay 0.1, the learning rate warming up to 2e-3 over 100 steps), on real batches of shakespeare.txt.
teenygrad compiles all of it with `tg.compile` (one trace, one program of generated numba kernels); eager
teenygrad runs the same step op by op on chapter 9's hand-fused kernels, from the same initial weights, so the
two must give the same losses (float32: chapter 9's tolerance, rtol 1e-3), which the script checks over every
step it runs. PyTorch eager (when torch is installed) runs the same model from its own initialisation, in a process
of its own (`gpt.torch_child`: its thread pool and numba's would fight over the cores in one process). The
frameworks are timed in alternation, batch by batch, in one run; the script prints the median and best ms per
step and the ratios, one per line, for the book's model (4 layers, 4 heads, 128 wide, context 64, batch 12) and
a wider one (6 layers, 6 heads, 384 wide, context 128, batch 8).

The ratios move with the machine's load, so the script prints them twice: over all rounds (a round is one step of
each framework on the same batch), and over the quietest third of rounds (those whose three steps took the least
time together). On a shared 2-core machine they can differ by a few hundredths, either way: the frameworks do not
suffer alike from a busy neighbour. The small model's default of 150 timed steps is there because the ratio of
medians of 30 steps moved by +-0.04 between identical runs (and between 30-step windows of one run).

Compile time: the small model's compiled step is first called in a fresh process with an empty cache directory
($TEENYGRAD_CACHE_DIR): trace + passes + code generation + numba compile + one run ("cold"); then in a second
process that finds the generated kernels in that cache ("warm"). The script prints what it measured, whatever it is.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpt import TUNED, batches, torch_child  # noqa: E402  (tunes teenygrad)

import teenygrad as tg  # noqa: E402
from teenygrad import optim  # noqa: E402
from teenygrad.gpt import GPT, GPTConfig  # noqa: E402

from _timing import alternate  # noqa: E402

MODELS = {  # name -> (config, batch size)
    "shakespeare": (GPTConfig(vocab_size=73, block_size=64, n_layer=4, n_head=4, n_embd=128), 12),
    "wide": (GPTConfig(vocab_size=73, block_size=128, n_layer=6, n_head=6, n_embd=384), 8),
    # --smoke's: the fewest kernels to compile (a cold compile of the small model takes a minute or more on 2 cores)
    "tiny": (GPTConfig(vocab_size=73, block_size=16, n_layer=1, n_head=2, n_embd=32), 4),
}
STEPS_TIMED = {"shakespeare": 150, "wide": 30}  # default timed steps per framework (a wide step takes ~0.5 s)
LR, MIN_LR, WARMUP, STEPS = 2e-3, 2e-4, 100, 2000  # chapter 9's recipe: warm-up, then a cosine
BETAS, WEIGHT_DECAY, CLIP = (0.9, 0.99), 0.1, 1.0
RTOL = 1e-3  # chapter 9's float32 tolerance


def train_step(model: GPT) -> tuple:
    """Chapter 9's training step on `model`, as a function of two Tensors returning the loss; and its optimizer."""
    opt = optim.AdamW(model.parameters(), lr=LR, betas=BETAS, weight_decay=WEIGHT_DECAY)

    def step(x: tg.Tensor, y: tg.Tensor) -> tg.Tensor:
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm(model.parameters(), CLIP)
        opt.step()
        return loss
    return step, opt


def on_numpy(step, opt):
    """The step on numpy batches, returning the loss as a float; the learning rate follows chapter 9's schedule
    (these steps are all in its warm-up: without it the wide model diverges, and two runs then part at once)."""
    count = [0]

    def run(x: np.ndarray, y: np.ndarray) -> float:
        opt.lr = optim.lr_at(count[0], STEPS, LR, warmup=WARMUP, min_lr=MIN_LR)  # read by the compiled step too
        count[0] += 1
        return step(tg.tensor(x), tg.tensor(y)).item()
    return run


def teenygrad_steps(cfg: GPTConfig) -> tuple:
    """Eager and compiled steps on two copies of one model (each on numpy batches), and the compiled function."""
    tg.manual_seed(0)
    model, twin = GPT(cfg), GPT(cfg)
    twin.load_state_dict(model.state_dict())
    (eager, opt), (step, twin_opt) = train_step(model), train_step(twin)
    compiled = tg.compile(step)
    return on_numpy(eager, opt), on_numpy(compiled, twin_opt), compiled


def kernels_of(compiled) -> str:
    program = compiled.program
    distinct = len(re.findall(r"^def k\d+\(", program.source, re.M))
    return f"{len(program.schedule.kernels)} kernels ({distinct} distinct functions)"


def compare(name: str, steps: int) -> None:
    cfg, batch = MODELS[name]
    eager, compiled, program = teenygrad_steps(cfg)
    data = batches(steps + 3, seed=1, cfg=cfg, batch=batch)
    t0 = time.perf_counter()
    compiled(*data[0])  # the first call traces and compiles; the second re-traces (.grad now exists), reusing it
    first = time.perf_counter() - t0
    eager(*data[0])
    print(f"\nGPT {name}: {cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd} wide, context {cfg.block_size}, "
          f"batch {batch}; {steps} timed steps each, alternating")
    print(f"teenygrad compiled: first call {first:.1f} s (trace + compile + run, cache "
          f"{os.environ.get('TEENYGRAD_CACHE_DIR') or 'the default directory'}); {kernels_of(program)}")
    fns = {"teenygrad eager": eager, "teenygrad compiled": compiled}
    try:
        child, label = torch_child(cfg, CLIP, BETAS)
        fns[label] = child
    except ImportError:
        child = None
        print("PyTorch is not installed: timing teenygrad only")
    times, losses = alternate(fns, data[1:], warmup=2)
    if child:
        child.close()
    med = {}
    for label, t in times.items():
        med[label] = statistics.median(t)
        print(f"{label:28s} {1e3 * med[label]:8.1f} ms/step (best {1e3 * min(t):7.1f})   "
              f"{batch * cfg.block_size / med[label]:9,.0f} tokens/s")
    le, lc = np.array(losses["teenygrad eager"]), np.array(losses["teenygrad compiled"])
    rel = np.abs(lc - le) / np.abs(le)
    off = np.flatnonzero(~np.isclose(lc, le, rtol=RTOL, atol=1e-6))
    print(f"losses compiled vs eager over {len(le)} steps: {'the same' if off.size == 0 else 'DIFFERENT'} "
          f"(float32, rtol {RTOL}; largest relative difference {rel.max():.1e}, over the first 5 steps "
          f"{rel[:5].max():.1e}" + (f"; first past rtol at step {off[0] + 1}" if off.size else "") +
          f"; last loss {le[-1]:.4f})")
    rounds = np.sum([times[label] for label in times], axis=0)  # each round's steps, all frameworks together
    quiet = np.argsort(rounds)[:max(1, len(rounds) // 3)]
    calm = {label: statistics.median(np.asarray(t)[quiet]) for label, t in times.items()}
    for label, ratio in [("eager teenygrad", "teenygrad eager")] + [(label, label) for label in med
                                                                   if label.startswith("PyTorch")]:
        print(f"{name}: compiled teenygrad / {label} time per step: {med['teenygrad compiled'] / med[ratio]:.2f} "
              f"(in the quietest {len(quiet)} of {len(rounds)} rounds: "
              f"{calm['teenygrad compiled'] / calm[ratio]:.2f})")
    if child is None:
        print(f"{name}: compiled teenygrad / PyTorch eager time per step: skipped (PyTorch is not installed)")


def child() -> None:
    """In a fresh process: the small model's first compiled calls, timed in parts (printed as one JSON line)."""
    import teenygrad.compiler.backend as backend
    import teenygrad.compiler.compiled as compiled_module  # where Compiled calls the back end
    parts = {"numba": 0.0}

    def timed(fn, key):
        def wrapper(*args, **kwargs):
            parts.setdefault("trace", time.perf_counter() - parts["start"])
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            parts[key] = parts.get(key, 0.0) + time.perf_counter() - t0
            return out
        return wrapper
    compiled_module.compile_graph = timed(compiled_module.compile_graph, "back end")
    backend.compile_kernels = timed(backend.compile_kernels, "numba")  # when the back end compiles eagerly
    cfg, batch = MODELS["shakespeare"]
    _, compiled, _ = teenygrad_steps(cfg)
    calls = []
    for x, y in batches(3, seed=1, cfg=cfg, batch=batch):
        parts["start"] = time.perf_counter()
        compiled(x, y)
        calls.append(time.perf_counter() - parts["start"])
    print(json.dumps({"calls": calls, **{k: v for k, v in parts.items() if k != "start"}}))


def compile_times() -> None:
    print("\ncompile time of the small model's step (each in a new process, timed inside it):")
    with tempfile.TemporaryDirectory(prefix="teenygrad-compile-") as cache:
        env = dict(os.environ, TEENYGRAD_CACHE_DIR=cache)
        for label in ("cold (empty cache)", "warm (cache hit)"):
            run = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{label}: the process failed:\n{run.stderr[-2000:]}")
                return
            r = json.loads(run.stdout.strip().splitlines()[-1])
            first, step = r["calls"][0], r["calls"][2]
            rest = first - r["trace"] - r.get("back end", 0.0) - step  # lazy numba compiles at the first run
            print(f"{label:20s} first call {first:6.1f} s: trace {r['trace']:.1f} s, back end "
                  f"{r.get('back end', 0.0):.1f} s (of which numba {r['numba']:.1f} s), first run {rest + step:.1f} s "
                  f"(a step: {step:.2f} s); second call (re-trace, same program) {r['calls'][1]:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, help="timed steps per framework and model (default: 150 for the small "
                    "model, 30 for the wide one; --quick: 5; --smoke: 3)")
    ap.add_argument("--quick", action="store_true", help="the small model only, no compile-time runs")
    ap.add_argument("--smoke", action="store_true", help="the smallest form: a tiny model only, no compile-time runs")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one compile-time measurement
    args = ap.parse_args()
    if args.child:
        return child()
    print("teenygrad.tune():", TUNED)
    import numba
    print(f"numba {numba.__version__}, {numba.get_num_threads()} threads")
    if not (args.quick or args.smoke):
        compile_times()
    models = ["tiny"] if args.smoke else ["shakespeare"] if args.quick else ["shakespeare", "wide"]
    for name in models:
        compare(name, args.steps or (3 if args.smoke else 5 if args.quick else STEPS_TIMED[name]))


if __name__ == "__main__":
    main()
