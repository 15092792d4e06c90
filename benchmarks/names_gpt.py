"""Chapter 9's tiny names GPT: a training step in teenygrad against the same model built from chapter 5's
scalar `Value`s (pure Python, one graph node per number), in one run.

    python benchmarks/names_gpt.py                  # 30 scalar steps, 300 teenygrad steps
    python benchmarks/names_gpt.py --scalar-steps 10
    python benchmarks/names_gpt.py --quick          # a smoke run: 2 scalar steps, 10 teenygrad steps

Model: 1 layer, 16-wide embeddings, 4 heads, context 16, RMSNorm, ReLU, no biases, 27 symbols
(4,192 parameters); one name per step, Adam at lr 0.01 with linear decay. Both start from the same
weights and see the same names; the script prints ms per step for each, the ratio, and the two losses
after the scalar run's steps (they follow the same trajectory, float32 against float64).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import teenygrad as tg
from teenygrad import optim
from teenygrad.datasets import load_names
from teenygrad.gpt import GPT, GPTConfig
from teenygrad.text import Vocab
from teenygrad.value_gpt import ValueAdam, ValueGPT

CFG = GPTConfig(vocab_size=27, block_size=16, n_layer=1, n_head=4, n_embd=16, norm="rms", norm_weights=False,
                act="relu", bias=False, tie_weights=False, init_std=0.08)
LR, TOTAL = 0.01, 1000


def documents(n: int) -> list[list[int]]:
    names = load_names()
    vocab = Vocab.build(names)
    order = np.random.default_rng(0).permutation(len(names))[:n]
    return [[0, *vocab.encode(names[i])[:CFG.block_size - 1].tolist(), 0] for i in order]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scalar-steps", type=int, help="scalar steps (default 30; --quick: 2)")
    ap.add_argument("--steps", type=int, help="teenygrad steps (default 300; --quick: 10)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 scalar steps, 10 teenygrad steps")
    args = ap.parse_args()
    args.scalar_steps = args.scalar_steps or (2 if args.quick else 30)
    args.steps = args.steps or (10 if args.quick else 300)
    tg.tune()  # the settings a training script asks for (teenygrad.tuning)
    docs = documents(max(args.steps, args.scalar_steps) + 1)

    tg.manual_seed(0)
    model = GPT(CFG)
    assert model.num_parameters() == 4192
    scalar = ValueGPT(model.state_dict(), CFG.n_head)
    opt = optim.Adam(model.parameters(), lr=LR)
    sopt = ValueAdam(scalar.parameters(), lr=LR)

    def tg_step(i: int) -> float:
        toks = docs[i]
        opt.lr = LR * (1 - i / TOTAL)
        _, loss = model(tg.tensor([toks[:-1]]), tg.tensor([toks[1:]]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    def scalar_step(i: int) -> float:
        sopt.lr = LR * (1 - i / TOTAL)
        loss = scalar.loss(docs[i])
        loss.backward()
        sopt.step()
        return loss.data

    t0 = time.perf_counter()
    s_losses = [scalar_step(i) for i in range(args.scalar_steps)]
    t_scalar = (time.perf_counter() - t0) / args.scalar_steps
    tg_step(0)  # warm-up: compiles nothing new after the first call, but loads the kernels
    tg.manual_seed(0)
    model = GPT(CFG)  # start again from the same weights for the timed run
    opt = optim.Adam(model.parameters(), lr=LR)
    t0 = time.perf_counter()
    t_losses = [tg_step(i) for i in range(args.steps)]
    t_tg = (time.perf_counter() - t0) / args.steps

    n = args.scalar_steps
    print(f"names GPT, {model.num_parameters():,} parameters, one name per step")
    print(f"scalar Values (pure Python)  {1e3 * t_scalar:8.2f} ms/step   ({n} steps)")
    print(f"teenygrad                    {1e3 * t_tg:8.2f} ms/step   ({args.steps} steps)")
    print(f"teenygrad is {t_scalar / t_tg:.0f}x faster per step (target: at least 50x)")
    print(f"mean loss over the first {n} steps: scalar {np.mean(s_losses):.4f}, teenygrad {np.mean(t_losses[:n]):.4f}")


if __name__ == "__main__":
    main()
