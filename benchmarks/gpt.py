"""Training-step time of chapter 9's Shakespeare GPT in teenygrad, and of the same model in PyTorch eager.

    python benchmarks/gpt.py                 # teenygrad, and PyTorch if it is installed (not a dependency)
    python benchmarks/gpt.py --fusions       # also: what each fused kernel buys (each one switched off)
    python benchmarks/gpt.py --steps 80      # more steps, a steadier median (default 40)
    python benchmarks/gpt.py --quick         # a smoke run: 2 timed steps each

Configuration (the book's): 4 layers, 4 heads, 128-wide embeddings, context 64, batch 12, LayerNorm, GELU,
tied embeddings, AdamW. One step = forward, backward, optimizer update, on real batches of shakespeare.txt.
The two frameworks are timed in alternation in one run (so a busy machine slows both alike), each in a process of
its own (PyTorch's steps run in a child process, `_timing.Child`, one at a time when the script asks: its thread pool
and numba's would fight over the cores in one process); the script prints milliseconds per step (median and best),
tokens per second and the ratio.
"""
from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

import numpy as np

import teenygrad as tg

# tune() sets the OpenMP spin count in the environment, before any OpenMP runtime loads: numba's here, and PyTorch's
# libgomp.so.1 in the child process that times PyTorch (it inherits the environment). torch is never imported in
# this process: loaded here, numba's parallel kernels would share its OpenMP runtime and its thread pool.
TUNED = "skipped (--no-tune)" if "--no-tune" in sys.argv else tg.tune()

from teenygrad import functional as F  # noqa: E402
from teenygrad import optim  # noqa: E402
from teenygrad.datasets import load_shakespeare  # noqa: E402
from teenygrad.gpt import GPT, GPTConfig  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import Child, alternate, has_module  # noqa: E402

CFG = GPTConfig(vocab_size=73,  # the characters of shakespeare.txt
                 block_size=64, n_layer=4, n_head=4, n_embd=128)
BATCH = 12


def batches(n: int, seed: int = 0, cfg: GPTConfig = CFG, batch: int = BATCH) -> list[tuple[np.ndarray, np.ndarray]]:
    """`n` batches of `batch` windows of shakespeare.txt at random positions: inputs and next characters."""
    text = load_shakespeare()
    code = {c: i for i, c in enumerate(sorted(set(text)))}
    assert len(code) == cfg.vocab_size
    data = np.array([code[c] for c in text[:200_000]], dtype=np.int64)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ix = rng.integers(0, data.size - cfg.block_size - 1, batch)
        x = np.stack([data[i:i + cfg.block_size] for i in ix])
        y = np.stack([data[i + 1:i + 1 + cfg.block_size] for i in ix])
        out.append((x, y))
    return out


def teenygrad_step():
    tg.manual_seed(0)
    model = GPT(CFG)
    opt = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)

    def step(x: np.ndarray, y: np.ndarray) -> float:
        _, loss = model(tg.tensor(x), tg.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def torch_step(cfg: GPTConfig = CFG, clip: float | None = None, betas: tuple = (0.9, 0.999), device: str = "cpu"):
    """PyTorch eager's step on the same model (its own random initialisation): forward, backward, (clip), AdamW, on
    `device` ("cpu", or "cuda" for benchmarks/gpu.py). Returns (step, (torch's version, its threads)); run it in a
    child process: `torch_child(...)`."""
    import torch
    import torch.nn as tnn
    import torch.nn.functional as tF

    torch.manual_seed(0)

    class Block(tnn.Module):
        def __init__(self, C: int, nh: int) -> None:
            super().__init__()
            self.ln1, self.ln2 = tnn.LayerNorm(C), tnn.LayerNorm(C)
            self.qkv, self.proj = tnn.Linear(C, 3 * C), tnn.Linear(C, C)
            self.fc, self.fc2 = tnn.Linear(C, 4 * C), tnn.Linear(4 * C, C)
            self.nh = nh

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, self.nh, C // self.nh).transpose(1, 2) for t in (q, k, v))
            y = tF.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
            return x + self.fc2(tF.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class TorchGPT(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            C = cfg.n_embd
            self.wte, self.wpe = tnn.Embedding(cfg.vocab_size, C), tnn.Embedding(cfg.block_size, C)
            self.blocks = tnn.ModuleList([Block(C, cfg.n_head) for _ in range(cfg.n_layer)])
            self.ln = tnn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for b in self.blocks:
                x = b(x)
            logits = self.ln(x) @ self.wte.weight.T
            return tF.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    model = TorchGPT().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=betas, weight_decay=0.1)

    def step(x: np.ndarray, y: np.ndarray) -> float:
        loss = model(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        return loss.item()  # waits for the GPU's work: the step's time is all of it
    return step, (torch.__version__, torch.get_num_threads())


def torch_child(cfg: GPTConfig = CFG, clip: float | None = None, betas: tuple = (0.9, 0.999),
                device: str = "cpu") -> tuple[Child, str]:
    """PyTorch eager's step (`torch_step`) in a process of its own, called like a step, and a label for it.
    ImportError when torch is not installed."""
    if not has_module("torch"):
        raise ImportError("torch")
    child = Child(torch_step, cfg, clip, betas, device)
    version, threads = child.info
    return child, f"PyTorch {version} eager"


def time_steps(steps: dict, data: list, warmup: int = 3) -> dict[str, list[float]]:
    """Run the steps in alternation over the same batches; seconds per step for each."""
    return alternate(steps, data, warmup)[0]


def report(name: str, t: list[float]) -> float:
    med = statistics.median(t)
    print(f"{name:28s} {1e3 * med:8.1f} ms/step (best {1e3 * min(t):6.1f})   "
          f"{BATCH * CFG.block_size / med:9,.0f} tokens/s")
    return med


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, help="timed steps per framework (default 40; --quick: 2)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 timed steps after 1 warm-up step")
    ap.add_argument("--fusions", action="store_true", help="also time teenygrad with each fusion switched off")
    ap.add_argument("--no-tune", action="store_true",
                    help="skip teenygrad.tune() (OpenMP spin count, malloc thresholds), to measure what it buys")
    args = ap.parse_args()
    print("teenygrad.tune():", TUNED)
    n, warmup = (args.steps or 2, 1) if args.quick else (args.steps or 40, 3)
    data = batches(n + warmup)
    steps = {"teenygrad": teenygrad_step()}
    try:
        child, label = torch_child()
        steps[label] = child
    except ImportError:
        child = None
        print("PyTorch is not installed: timing teenygrad only (pip install torch==2.13.0 to compare)")
    print(f"GPT {CFG.n_layer} layers x {CFG.n_embd} wide, {CFG.n_head} heads, context {CFG.block_size}, "
          f"batch {BATCH}; {n} steps each, alternating" + (", PyTorch in a process of its own" if child else ""))
    times = time_steps(steps, data, warmup)
    if child:
        child.close()
    meds = {name: report(name, t) for name, t in times.items()}
    if len(meds) == 2:
        tg_med, pt_med = meds.values()
        print(f"teenygrad / PyTorch time per step: {tg_med / pt_med:.2f}  "
              f"({'faster' if tg_med < pt_med else 'slower'} than PyTorch eager)")
    else:
        print("teenygrad / PyTorch time per step: skipped (PyTorch is not installed)")
    if args.fusions:
        print("\nwhat each fusion buys (teenygrad, that fusion switched off):")
        for name in ["all fused", *F.FUSIONS, "none fused"]:
            fn = teenygrad_step()
            off = () if name == "all fused" else tuple(F.FUSIONS) if name == "none fused" else (name,)
            with F.unfused(*off) if off else contextlib.nullcontext():
                t = time_steps({name: fn}, data, warmup)[name]
            report(name if off == () or name == "none fused" else f"without fused {name}", t)


if __name__ == "__main__":
    main()
