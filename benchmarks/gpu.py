"""Chapter 11's GPU kernels against cuBLAS and PyTorch, on a GPU, in one run; the figures go to a results file.

    python benchmarks/gpu.py               # on a GPU: the SGEMM ladder at 4096^3 and 1024^3, sum_rows and
                                           # softmax_rows, the launch overhead, a GPT's training step on
                                           # device="cuda" against PyTorch eager on the same GPU (the book's
                                           # model and nanoGPT's shakespeare-char size, alternating in one run);
                                           # writes benchmarks/results/gpu.json
    python benchmarks/gpu.py --size 2048   # the ladder at 2048^3 instead of 4096^3
    python benchmarks/gpu.py --simulate    # without a GPU: every kernel once on tiny shapes in numba-cuda's
                                           # simulator, values checked against numpy, and one training step of
                                           # a tiny GPT on device="cuda" against the CPU's; prints, writes nothing
    python benchmarks/gpu.py --ptx         # without a GPU, with `make gpu`'s CUDA libraries: compile every kernel
                                           # for an H100/H200 (sm_90) and print what the compiler reports:
                                           # registers a thread, spills, shared memory, vector loads

The reference is cuBLAS's SGEMM through PyTorch (TF32 off, so both sides compute in float32) or CuPy, whichever is
installed; neither is a dependency of teenygrad; sum_rows and softmax_rows are set beside PyTorch's own (on a 16384^2
array, so that a launch's cost from Python hides behind the GPU's work). GFLOP/s = 2*M*N*K / seconds a launch, the
median over batches of launches queued back to back between two CUDA events, after a warm-up launch (the first
launch compiles). The results file records the device, the driver, the CUDA toolkit, the versions and the date
beside every figure; chapter 11 reads it through teenygrad.kernels.cuda.results.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "gpu.json"
# the training step's models: chapter 9's (benchmarks/gpt.py's CFG, batch 12) and nanoGPT's shakespeare-char size
# (6 layers, 384 wide, 6 heads, context 256, batch 64), on shakespeare.txt's 73 characters
TRAINING = {"book": ({"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": 64}, 12),
            "nanogpt_shakespeare_char": ({"n_layer": 6, "n_head": 6, "n_embd": 384, "block_size": 256}, 64)}


def teenygrad_cuda_step(cfg, clip: float = 1.0):
    """teenygrad's training step with the model on device="cuda": forward, backward, clipping, AdamW, as chapter 9's
    loop (benchmarks/gpt.py's PyTorch step does the same). Returns (step, launches): step(x, y) -> the loss, and
    launches(x, y) -> the kernel launches one step makes (every kernel[grid, block] counted)."""
    import teenygrad as tg
    from teenygrad import optim
    from teenygrad.gpt import GPT
    tg.manual_seed(0)
    model = GPT(cfg).to("cuda")
    opt = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)

    def step(x: np.ndarray, y: np.ndarray) -> float:
        _, loss = model(tg.tensor(x, device="cuda"), tg.tensor(y, device="cuda"))
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm(model.parameters(), clip)
        opt.step()
        return loss.item()  # copies the loss back: waits for every launch of the step

    def launches(x: np.ndarray, y: np.ndarray) -> int:
        from teenygrad.kernels.cuda.launch import counted_launches
        with counted_launches() as counts:
            step(x, y)
        return sum(counts.values())
    return step, launches


def simulated_training_step() -> int:
    """The training code paths on a tiny GPT in the simulator: chapter 9's run for one step on device="cuda", its loss
    against the same step on the CPU from the same weights, and the launches of one timed step (`teenygrad_cuda_step`).
    """
    from teenygrad.gpt import GPTConfig
    cfg = GPTConfig(vocab_size=73, block_size=8, n_layer=1, n_head=2, n_embd=16)
    run = train_like_chapter9("cuda", steps=1, cpu_steps=1, val_n=1, batch_size=2, cfg=cfg)
    x, y = np.random.default_rng(0).integers(0, 73, (2, 8)), np.random.default_rng(1).integers(0, 73, (2, 8))
    launches = teenygrad_cuda_step(cfg)[1](x, y)
    print(f"  chapter 9's run, 1 step of a 1-layer, 16-wide GPT on cuda: loss {run['first_losses'][0]:.5f}, the "
          f"CPU's within {run['first_max_diff']:.1e}; {launches} kernel launches in a first step (AdamW's state "
          f"included: two zeros a parameter)")
    if run["first_max_diff"] > 1e-4:
        print("chapter 9's run on the GPU gave other losses than on the CPU", file=sys.stderr)
        return 1
    return 0


CH9_BAND = 1.9  # chapter 9's validation loss after its 2,000 steps is at most this (tests/test_ch09_gpt.py)


def train_like_chapter9(device: str, steps: int = 2000, cpu_steps: int = 10, cfg=None, val_n: int = 50,
                        batch_size: int = 12) -> dict:
    """Chapter 9's Shakespeare run (its model, batches, AdamW, schedule and clipping) on `device`: the validation loss
    after `steps` steps, and the first `cpu_steps` losses beside the same steps on the CPU from the same weights."""
    import time

    import teenygrad as tg
    from teenygrad import optim
    from teenygrad.datasets import load_shakespeare
    from teenygrad.gpt import GPT, GPTConfig
    BATCH, CONTEXT, LR, MIN_LR, WARMUP = batch_size, 64, 2e-3, 2e-4, 100
    text = load_shakespeare()
    chars = sorted(set(text))
    code = {c: i for i, c in enumerate(chars)}
    data = np.array([code[c] for c in text], dtype=np.int64)
    train, val = data[:int(0.9 * len(data))], data[int(0.9 * len(data)):]
    cfg = cfg or GPTConfig(vocab_size=len(chars), block_size=CONTEXT, n_layer=4, n_head=4, n_embd=128)

    def batch(split, rng):
        starts = rng.integers(0, len(split) - cfg.block_size - 1, BATCH)
        return (np.stack([split[i:i + cfg.block_size] for i in starts]),
                np.stack([split[i + 1:i + cfg.block_size + 1] for i in starts]))

    val_rng = np.random.default_rng(1234)
    val_batches = [batch(val, val_rng) for _ in range(val_n)]

    def run(on: str, n: int):
        tg.manual_seed(0)
        model = GPT(cfg).to(on)
        opt = optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.99), weight_decay=0.1)
        rng, losses = np.random.default_rng(0), []
        for step in range(n):
            opt.lr = optim.lr_at(step, steps, LR, warmup=WARMUP, min_lr=MIN_LR)
            x, y = batch(train, rng)
            _, loss = model(tg.tensor(x, device=on), tg.tensor(y, device=on))
            opt.zero_grad()
            loss.backward()
            optim.clip_grad_norm(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
        return model, losses

    start = time.perf_counter()
    model, losses = run(device, steps)
    seconds = time.perf_counter() - start
    with tg.no_grad():
        val_loss = float(np.mean([model(tg.tensor(x, device=device), tg.tensor(y, device=device))[1].item()
                                  for x, y in val_batches]))
    cpu_losses = run("cpu", min(cpu_steps, steps))[1]
    first = losses[:len(cpu_losses)]
    return {"steps": steps, "val_loss": val_loss, "minutes": seconds / 60, "first_losses": first,
            "cpu_first_losses": cpu_losses, "first_max_diff": float(np.max(np.abs(np.subtract(first, cpu_losses))))}


def measure_training(record: dict, steps: int = 20) -> None:
    """The training step of each model in TRAINING on this GPU, teenygrad's and PyTorch eager's alternating over the
    same batches (PyTorch in a process of its own), into record["training"]."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gpt as book  # benchmarks/gpt.py: the batches and PyTorch's model

    from teenygrad.gpt import GPTConfig

    from _timing import alternate
    record["training"] = {}
    for name, (shape, batch) in TRAINING.items():
        cfg = GPTConfig(vocab_size=73, **shape)
        data = book.batches(steps + 3, cfg=cfg, batch=batch)
        step, launches = teenygrad_cuda_step(cfg)
        timed_steps = {"teenygrad": step}
        try:
            child, label = book.torch_child(cfg, clip=1.0, device="cuda")
            timed_steps[label] = child
        except ImportError:
            child, label = None, None
        times = alternate(timed_steps, data, warmup=3)[0]
        if child:
            child.close()
        row = {"config": {**shape, "batch": batch}, "launches_per_step": launches(*data[0]),
               "teenygrad_ms": statistics.median(times["teenygrad"]) * 1e3}
        if label:
            row["reference"] = label
            row["torch_ms"] = statistics.median(times[label]) * 1e3
            row["of_torch"] = row["teenygrad_ms"] / row["torch_ms"]  # > 1: slower than PyTorch eager
        record["training"][name] = row
        print(f"training step, {name}: teenygrad {row['teenygrad_ms']:.1f} ms ({row['launches_per_step']} launches)"
              + (f", {label} {row['torch_ms']:.1f} ms: {row['of_torch']:.2f}x its time" if label else ""))
    run = record["chapter9_run"] = train_like_chapter9("cuda")
    run["in_band"] = run["val_loss"] <= CH9_BAND
    print(f"chapter 9's run on the GPU: {run['steps']} steps in {run['minutes']:.1f} min, validation loss "
          f"{run['val_loss']:.3f} (chapter 9's band: <= {CH9_BAND}); first {len(run['cpu_first_losses'])} losses "
          f"within {run['first_max_diff']:.1e} of the CPU's")


def simulate() -> int:
    os.environ["TEENYGRAD_CUDA"] = "sim"
    sys.setswitchinterval(5e-5)  # the simulator's threads wait at syncthreads holding the GIL: switch often (~5x)
    from teenygrad.kernels.cuda import LADDER, describe, reduce
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((10, 6), np.float32), rng.standard_normal((6, 9), np.float32)
    small = {"naive": {"block": 4}, "coalesced": {"block": 4}, "shared": {"tile": 4},
             "blocked_1d": {"BM": 8, "BN": 8, "BK": 4, "TM": 4},
             "blocked_2d": {"BM": 8, "BN": 8, "BK": 4, "TM": 2, "TN": 2},
             "vectorised": {"BM": 8, "BN": 8, "BK": 4, "TM": 4, "TN": 4},
             "warptiled": {"BM": 16, "BN": 16, "BK": 4, "WM": 8, "WN": 16, "WNITER": 2, "TM": 1, "TN": 2},
             "double_buffered": {"BM": 16, "BN": 16, "BK": 4, "WM": 8, "WN": 16, "WNITER": 2, "TM": 1, "TN": 2}}
    print(f"device: {describe()}")
    for name, fn in LADDER:
        out = np.zeros((10, 9), np.float32)
        fn(a, b, out, **small[name])
        err = float(np.abs(out - a @ b).max())
        print(f"  sgemm {name:<15} 10x6 @ 6x9   max |error| {err:.1e}")
        if err > 1e-4:
            print(f"sgemm {name} gave wrong values", file=sys.stderr)
            return 1
    if simulated_training_step():
        return 1
    x = rng.standard_normal((3, 40), np.float32)
    sums, soft = np.zeros(3, np.float32), np.zeros_like(x)
    reduce.sum_rows(x, sums, threads=16)
    reduce.softmax_rows(x, soft, threads=16)
    e = np.exp(x - x.max(1, keepdims=True))
    errs = float(np.abs(sums - x.sum(1)).max()), float(np.abs(soft - e / e.sum(1, keepdims=True)).max())
    print(f"  sum_rows 3x40 max |error| {errs[0]:.1e}; softmax_rows {errs[1]:.1e}")
    if max(errs) > 1e-4:
        print("a reduction gave wrong values", file=sys.stderr)
        return 1
    print("simulated: no figure is measured or recorded (timings in the simulator mean nothing)")
    return 0


def ptx_report(cc: tuple[int, int] = (9, 0)) -> int:
    """Compile every kernel of teenygrad.kernels.cuda for compute capability `cc` (no GPU needed, only NVVM and
    ptxas from the cu12 wheels) and print, per kernel, what decides its speed before it runs: registers a thread
    (occupancy), bytes spilled to local memory (slow), shared memory a block, and how shared memory is loaded
    (`ld.shared.v4.f32`: 4 floats an instruction). Returns 1 when a kernel does not compile or spills."""
    import inspect
    import re
    import subprocess
    import sysconfig
    import types

    from numba import cuda  # the GPU target (not the simulator): imported before teenygrad chooses
    if cuda.config.ENABLE_CUDASIM:
        print("--ptx needs numba's GPU target: unset NUMBA_ENABLE_CUDASIM", file=sys.stderr)
        return 1
    if not cuda.is_available():  # numba-cuda 0.30.4 asks the driver which GPU a device function is for
        import numba.cuda.dispatcher
        numba.cuda.dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=cc)
    from numba import types as nt

    from teenygrad.kernels.cuda import elementwise, matmul, optim, reduce

    ptxas = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cuda_nvcc" / "bin" / "ptxas"

    def defaults(fn) -> dict:  # a rung's tile sizes
        return {k: p.default for k, p in inspect.signature(fn).parameters.items()
                if p.default is not p.empty and k not in ("transposed", "bias")}

    mm = "void(float32[:, ::1], float32[:, ::1], float32[:, ::1])"
    kernels = [("sgemm naive", matmul.naive_kernel, mm), ("sgemm coalesced", matmul.coalesced_kernel, mm),
               ("sgemm shared", matmul.shared_kernel(defaults(matmul.sgemm_shared)["tile"]), mm),
               ("sgemm blocked_1d", matmul.blocked_kernel(**defaults(matmul.sgemm_blocked_1d), TN=1), mm),
               ("sgemm blocked_2d", matmul.blocked_kernel(**defaults(matmul.sgemm_blocked_2d)), mm),
               ("sgemm vectorised", matmul.blocked_kernel(**defaults(matmul.sgemm_vectorised), vectorised=True), mm),
               ("sgemm warptiled", matmul.warptiled_kernel(**defaults(matmul.sgemm_warptiled),
                                                           double_buffered=False), mm),
               ("sgemm double_buffered", matmul.warptiled_kernel(**defaults(matmul.sgemm_double_buffered),
                                                                 double_buffered=True), mm),
               ("sgemm a.T @ b.T", matmul.warptiled_kernel(**defaults(matmul.sgemm_double_buffered),
                                                           double_buffered=True, transposed=(True, True)), mm),
               ("sgemm a @ b.T + bias", matmul.warptiled_kernel(**defaults(matmul.sgemm_double_buffered),
                                                                double_buffered=True, transposed=(False, True),
                                                                with_bias=True),
                "void(float32[:, ::1], float32[:, ::1], float32[:, ::1], float32[::1])"),
               ("sum_rows", reduce.sum_rows_kernel, "void(float32[:, ::1], float32[::1])"),
               ("sum_rows_warp", reduce.sum_rows_warp_kernel, "void(float32[:, ::1], float32[::1])"),
               ("softmax_rows", reduce.softmax_rows_kernel, "void(float32[:, ::1], float32[:, ::1])"),
               ("elementwise exp", elementwise.UNARY_KERNELS["exp"],
                "void(int64[::1], float32[::1], int64[::1], int64, float32[::1])"),
               ("elementwise add", elementwise.BINARY_KERNELS["add"],
                "void(int64[::1], float32[::1], int64[::1], int64, float32[::1], int64[::1], int64, float32[::1])")]
    # the optimizers' group kernels: GROUP parameters a launch, handed over as tuples of arrays and of scalars
    group, scalars, f32 = (nt.UniTuple(nt.Array(nt.float32, 1, "C"), optim.GROUP), nt.UniTuple(nt.float32, optim.GROUP),
                           nt.float32)
    kernels += [("adam_update_group", optim.adam_group_kernel, nt.void(group, group, group, group, scalars, scalars,
                                                                        *[f32] * 7)),
                ("sgd_update_group", optim.sgd_group_kernel, nt.void(group, group, group, f32, f32, f32)),
                ("sum_of_squares_group", optim.sum_of_squares_group_kernel,
                 nt.void(group, nt.Array(nt.float64, 2, "C"), nt.int64)),
                ("scale_group", optim.scale_group_kernel, nt.void(group, f32))]
    try:
        cuda.compile_ptx(lambda x: None, "void(float32[::1])", cc=cc)
    except Exception as error:  # noqa: BLE001 - numba's error for missing NVVM/NVRTC varies by version
        print(f"cannot compile for a GPU here ({str(error).splitlines()[0]}): `make gpu` installs the CUDA libraries",
              file=sys.stderr)
        return 2
    print(f"compiled for sm_{cc[0]}{cc[1]} without running anything")
    failed = 0
    for name, kernel, signature in kernels:
        try:
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=cc)
        except Exception as error:  # noqa: BLE001 - reported, and the run fails
            print(f"  {name:<22} does not compile: {str(error).splitlines()[0]}")
            failed = 1
            continue
        vector, scalar = ptx.count("ld.shared.v4.f32"), ptx.count("ld.shared.f32")
        line = f"  {name:<22} shared loads in the code: {vector} of 4 floats, {scalar} of 1"
        if ptxas.exists():
            with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
                f.write(ptx)
                f.flush()
                info = subprocess.run([str(ptxas), f"-arch=sm_{cc[0]}{cc[1]}", "-v", f.name, "-o", os.devnull],
                                      capture_output=True, text=True).stderr
            registers = re.search(r"Used (\d+) registers", info)
            spilled = sum(int(n) for n in re.findall(r"(\d+) bytes spill stores", info))
            smem = re.search(r"(\d+) bytes smem", info)
            line += (f"; {registers.group(1) if registers else '?'} registers a thread, {spilled} bytes spilled, "
                     f"{smem.group(1) if smem else 0} bytes of shared memory")
            failed |= spilled > 0
        print(line)
    if not ptxas.exists():
        print(f"(no ptxas at {ptxas}: `make gpu` installs it; registers and spills not reported)")
    return failed


def timed(start_event, fn, launches: int, batches: int = 5) -> float:
    """Seconds a launch of fn: the median over `batches` of (time of `launches` back-to-back launches) / launches,
    timed with CUDA events, after one warm-up launch (the first launch compiles).

    The launches are queued without waiting between them, so the GPU's time is what is measured: timing one launch
    between two events would add the ~30 us Python spends launching it, as much as a small kernel runs.
    `start_event()` makes an event with .record() and .synchronize(); elapsed(start, end) is in seconds."""
    fn()
    per_launch = []
    for _ in range(batches):
        start, end = start_event(), start_event()
        start.record()
        for _ in range(launches):
            fn()
        end.record()
        end.synchronize()
        per_launch.append(start.seconds_to(end) / launches)
    return statistics.median(per_launch)


class NumbaEvent:
    """A numba CUDA event with the interface `timed` uses."""

    def __init__(self):
        from numba import cuda
        self.event = cuda.event()

    def record(self) -> None:
        self.event.record()

    def synchronize(self) -> None:
        self.event.synchronize()

    def seconds_to(self, end: NumbaEvent) -> float:
        return self.event.elapsed_time(end.event) / 1000


class TorchEvent:
    """A PyTorch CUDA event with the interface `timed` uses."""

    def __init__(self):
        import torch
        self.event = torch.cuda.Event(enable_timing=True)

    def record(self) -> None:
        self.event.record()

    def synchronize(self) -> None:
        self.event.synchronize()

    def seconds_to(self, end: TorchEvent) -> float:
        return self.event.elapsed_time(end.event) / 1000


def reference_sgemm():
    """(name, fn(M, N, K) -> seconds a product) for cuBLAS through PyTorch or CuPy, or None."""
    try:
        import torch
        if not torch.cuda.is_available():  # a CPU-only PyTorch: try CuPy
            raise ImportError("PyTorch without CUDA")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

        def run(M, N, K):
            a, b = torch.randn(M, K, device="cuda"), torch.randn(K, N, device="cuda")
            c = torch.empty(M, N, device="cuda")
            return timed(TorchEvent, lambda: torch.mm(a, b, out=c), launches=5)
        return f"cuBLAS via PyTorch {torch.__version__} (TF32 off)", run
    except ImportError:
        pass
    try:
        import cupy

        class CupyEvent(TorchEvent):
            def __init__(self):
                self.event = cupy.cuda.Event()

            def seconds_to(self, end) -> float:
                return cupy.cuda.get_elapsed_time(self.event, end.event) / 1000

        def run(M, N, K):
            a, b = cupy.random.standard_normal((M, K), np.float32), cupy.random.standard_normal((K, N), np.float32)
            c = cupy.empty((M, N), np.float32)
            return timed(CupyEvent, lambda: cupy.matmul(a, b, out=c), launches=5)
        return f"cuBLAS via CuPy {cupy.__version__}", run
    except ImportError:
        return None


def reference_rows():
    """{"sum_rows": fn(x) -> seconds, "softmax_rows": ...} for PyTorch's own kernels on a float32 (M, N) numpy x,
    or None without a CUDA PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None

    def run(op):
        def seconds(x: np.ndarray) -> float:
            t = torch.from_numpy(x).cuda()
            return timed(TorchEvent, lambda: op(t), launches=20)
        return seconds
    return {"sum_rows": run(lambda t: torch.sum(t, dim=1)), "softmax_rows": run(lambda t: torch.softmax(t, dim=1)),
            "version": torch.__version__}


def cuda_versions() -> dict:
    """The CUDA driver's version and the CUDA toolkit's numba-cuda compiles with, as "major.minor"."""
    from numba.cuda.cudadrv import driver, runtime
    return {"driver": "{}.{}".format(*driver.get_version()), "cuda_toolkit": "{}.{}".format(*runtime.get_version())}


def measure(size: int, small: int = 1024, rows_n: int = 16384) -> dict:
    os.environ.setdefault("TEENYGRAD_CUDA", "gpu")
    import numba  # (not numba.cuda: teenygrad's device.py chooses the GPU or says what to do first)

    from teenygrad.kernels.cuda import LADDER, describe, reduce
    from teenygrad.kernels.cuda.device import cuda
    dev = cuda.get_current_device()
    ref = reference_sgemm()
    record = {"recorded": datetime.date.today().isoformat(), "device": describe(),
              "compute_capability": ".".join(map(str, dev.compute_capability)),
              **cuda_versions(), "numba": numba.__version__,
              "numba_cuda": _version("numba-cuda"), "numpy": np.__version__, "python": platform.python_version(),
              "reference": ref[0] if ref else None, "sgemm": {}, "reductions": {}, "launch_us": None}
    rng = np.random.default_rng(0)
    for n in (small, size):
        a = cuda.to_device(rng.standard_normal((n, n), np.float32))
        b = cuda.to_device(rng.standard_normal((n, n), np.float32))
        out = cuda.device_array((n, n), np.float32)
        flops = 2 * n ** 3
        rows = {}
        check = a.copy_to_host().astype(np.float64)[:64] @ b.copy_to_host()
        for name, fn in LADDER:
            # a 4096^3 naive product takes ~0.1 s: one launch a batch is enough there
            seconds = timed(NumbaEvent, lambda: fn(a, b, out), launches=1 if name == "naive" else 5,
                            batches=3 if name == "naive" else 5)
            err = float(np.abs(out.copy_to_host()[:64] - check).max() / np.abs(check).max())
            rows[name] = {"gflops": flops / seconds / 1e9, "seconds": seconds, "relative_error": err}
        if ref:
            seconds = ref[1](n, n, n)
            rows["cublas"] = {"gflops": flops / seconds / 1e9, "seconds": seconds}
            for name in rows:
                rows[name]["of_cublas"] = rows[name]["gflops"] / rows["cublas"]["gflops"]
        record["sgemm"][str(n)] = rows
        for name, row in rows.items():
            print(f"{n}^3 {name:<15} {row['gflops']:9.0f} GFLOP/s" + (f"  {row['of_cublas']:6.1%} of cuBLAS"
                                                                       if "of_cublas" in row else ""))
    # rows_n x rows_n float32 (16384: 1 GiB): a pass over it takes ~0.2 ms at the H200's 4.8 TB/s, far more than a
    # launch from Python (~30 us), so the launches queued by `timed` keep the GPU busy
    host = rng.standard_normal((rows_n, rows_n), np.float32)
    x = cuda.to_device(host)
    sums, soft = cuda.device_array(rows_n, np.float32), cuda.device_array((rows_n, rows_n), np.float32)
    torch_rows = reference_rows()
    if torch_rows:
        record["reductions_reference"] = f"PyTorch {torch_rows['version']}"
    # bytes each must move at least: sum_rows reads x once; softmax_rows reads it three times and writes it once
    for name, fn, out, passes in (("sum_rows", reduce.sum_rows, sums, 1),
                                  ("sum_rows_warp", reduce.sum_rows_warp, sums, 1),
                                  ("softmax_rows", reduce.softmax_rows, soft, 4)):
        seconds = timed(NumbaEvent, lambda: fn(x, out), launches=20)
        bytes_moved = passes * 4 * rows_n ** 2
        got, head = out.copy_to_host()[:64], host[:64].astype(np.float64)
        summed = name.startswith("sum_rows")
        want = head.sum(1) if summed else np.exp(head - head.max(1, keepdims=True))
        want = want if summed else want / want.sum(1, keepdims=True)
        row = {"shape": [rows_n, rows_n], "seconds": seconds, "gb_per_s": bytes_moved / seconds / 1e9,
               "max_error": float(np.abs(got - want).max())}  # the first 64 rows against numpy in float64
        line = f"{name} {rows_n}x{rows_n}: {seconds * 1e6:.0f} us, {row['gb_per_s']:.0f} GB/s"
        if torch_rows:
            row["torch_seconds"] = torch_rows[name.removesuffix("_warp")](host)
            row["of_torch"] = row["torch_seconds"] / seconds  # > 1: faster than PyTorch's kernel
            line += f"; PyTorch {row['torch_seconds'] * 1e6:.0f} us ({row['of_torch']:.0%} of its speed)"
        record["reductions"][name] = row
        print(line)

    @cuda.jit
    def empty(x):
        pass
    tiny = cuda.device_array(1, np.float32)
    empty[1, 1](tiny)
    cuda.synchronize()
    import time
    times = []
    for _ in range(2000):
        t0 = time.perf_counter()
        empty[1, 1](tiny)
        times.append(time.perf_counter() - t0)
    cuda.synchronize()
    record["launch_us"] = statistics.median(times) * 1e6
    print(f"launch of an empty kernel from Python: {record['launch_us']:.1f} us (median of 2000)")
    return record


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulate", action="store_true", help="no GPU: run every kernel once in the simulator")
    parser.add_argument("--ptx", action="store_true", help="no GPU: compile every kernel for sm_90 and report")
    parser.add_argument("--size", type=int, default=4096, help="the ladder's large size (default 4096)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the figures go (default %(default)s)")
    args = parser.parse_args()
    if args.simulate:
        return simulate()
    if args.ptx:
        return ptx_report()
    record = measure(args.size)
    measure_training(record)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"recorded in {args.out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
