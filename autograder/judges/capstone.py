"""The capstone's judge: chapter 9's two GPTs, their held-out data, and a forward pass in numpy (float64).

The capstone's training runs in a sandbox on the learner's pieces and hands back only the trained
parameters. The loss that is graded is computed here, in the grader's process, by a forward pass written
again in numpy, independent of teenygrad (a learner's piece could make teenygrad's own loss say anything):

    tokens -> wte[idx] + wpe[:T] -> blocks: x += proj(attention(qkv(norm(x)))); x += proj2(act(fc(norm(x))))
           -> norm -> head (or wte tied) -> cross-entropy against the next token

The held-out data are the chapter's: the names GPT's test names (chapter 8's split: permutation seed 0, the
last 10%), and the Shakespeare GPT's 50 fixed validation batches (seed 1234, 12 x 64 characters).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from teenygrad.datasets import load_names, load_shakespeare
from teenygrad.gpt import GPTConfig

NAMES_CFG = GPTConfig(vocab_size=27, block_size=16, n_layer=1, n_head=4, n_embd=16, norm="rms", norm_weights=False,
                      act="relu", bias=False, tie_weights=False, init_std=0.08)
SHAKESPEARE_BATCH, SHAKESPEARE_CONTEXT = 12, 64
EPS = 1e-5  # the norms' epsilon (teenygrad.functional)
GELU_K, GELU_A = math.sqrt(2 / math.pi), 0.044715


def shakespeare_cfg(vocab_size: int) -> GPTConfig:
    return GPTConfig(vocab_size=vocab_size, block_size=SHAKESPEARE_CONTEXT, n_layer=4, n_head=4, n_embd=128)


def twin_cfg(vocab_size: int, model: str) -> GPTConfig:
    """The model of the compiled-step check: chapter 9's Shakespeare GPT ("shakespeare"), or the same recipe on one
    narrow layer ("small", the quick form's: numba compiles its step in seconds, not a minute)."""
    if model == "shakespeare":
        return shakespeare_cfg(vocab_size)
    if model == "small":
        return GPTConfig(vocab_size=vocab_size, block_size=SHAKESPEARE_CONTEXT, n_layer=1, n_head=2, n_embd=32)
    raise ValueError(f"twin_cfg: model must be 'shakespeare' or 'small', got {model!r}")


# ---- the data, as chapter 9 prepares it --------------------------------------------------------------------------

@dataclass
class NamesData:
    itos: list[str]
    train: list[list[int]]  # encoded names, "." at both ends, cut to block_size + 1
    test: list[list[int]]


def names_data(cfg: GPTConfig = NAMES_CFG) -> NamesData:
    names = load_names()
    itos = ["."] + sorted(set("".join(names)))
    stoi = {c: i for i, c in enumerate(itos)}
    order = np.random.default_rng(0).permutation(len(names))
    cut1, cut2 = int(round(0.8 * len(names))), int(round(0.9 * len(names)))

    def encode(i: int) -> list[int]:
        return ([0] + [stoi[c] for c in names[i]] + [0])[:cfg.block_size + 1]
    return NamesData(itos, [encode(i) for i in order[:cut1]], [encode(i) for i in order[cut2:]])


@dataclass
class ShakespeareData:
    chars: list[str]
    train: np.ndarray
    val: np.ndarray


def shakespeare_data() -> ShakespeareData:
    text = load_shakespeare()
    chars = sorted(set(text))
    char_id = {c: i for i, c in enumerate(chars)}
    data = np.array([char_id[c] for c in text], dtype=np.int64)
    n_train = int(0.9 * len(data))
    return ShakespeareData(chars, data[:n_train], data[n_train:])


def batch(split: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Chapter 9's get_batch: 12 windows of 64 characters and the characters after each."""
    starts = rng.integers(0, len(split) - SHAKESPEARE_CONTEXT - 1, SHAKESPEARE_BATCH)
    x = np.stack([split[i:i + SHAKESPEARE_CONTEXT] for i in starts])
    y = np.stack([split[i + 1:i + SHAKESPEARE_CONTEXT + 1] for i in starts])
    return x, y


def val_batches(val: np.ndarray, n: int = 50) -> list[tuple[np.ndarray, np.ndarray]]:
    """The first n of the chapter's fixed validation batches."""
    rng = np.random.default_rng(1234)
    return [batch(val, rng) for _ in range(n)]


# ---- the model in numpy ----------------------------------------------------------------------------------------

def expected_shapes(cfg: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter of teenygrad.gpt.GPT(cfg) by its state_dict name, with its shape."""
    C, shapes = cfg.n_embd, {"wte.weight": (cfg.vocab_size, cfg.n_embd), "wpe.weight": (cfg.block_size, cfg.n_embd)}

    def norm(prefix: str) -> None:
        if cfg.norm_weights:
            shapes[f"{prefix}.weight"] = (C,)
            if cfg.bias and cfg.norm == "layer":
                shapes[f"{prefix}.bias"] = (C,)

    def linear(prefix: str, n_in: int, n_out: int) -> None:
        shapes[f"{prefix}.weight"] = (n_out, n_in)
        if cfg.bias:
            shapes[f"{prefix}.bias"] = (n_out,)
    for i in range(cfg.n_layer):
        norm(f"blocks.{i}.norm1")
        linear(f"blocks.{i}.attn.qkv", C, 3 * C)
        linear(f"blocks.{i}.attn.proj", C, C)
        norm(f"blocks.{i}.norm2")
        linear(f"blocks.{i}.mlp.fc", C, 4 * C)
        linear(f"blocks.{i}.mlp.proj", 4 * C, C)
    norm("norm")
    if not cfg.tie_weights:
        shapes["head.weight"] = (cfg.vocab_size, C)
    return shapes


def check_parameters(params: dict[str, np.ndarray], cfg: GPTConfig) -> str | None:
    """None if `params` are a GPT(cfg)'s parameters, all finite; else what is wrong."""
    want = expected_shapes(cfg)
    if set(params) != set(want):
        missing, extra = sorted(set(want) - set(params)), sorted(set(params) - set(want))
        return f"the parameters are not the GPT's (missing {missing[:3]}, unexpected {extra[:3]})"
    for name, shape in want.items():
        p = params[name]
        if p.shape != shape or not np.issubdtype(p.dtype, np.floating):
            return f"parameter {name} has shape {p.shape} and dtype {p.dtype}, expected {shape} floats"
        if not np.all(np.isfinite(p)):
            return f"parameter {name} is not finite (nan or inf): the training diverged"
    return None


def _norm(x: np.ndarray, params: dict, prefix: str, cfg: GPTConfig) -> np.ndarray:
    if cfg.norm == "layer":
        xc = x - x.mean(-1, keepdims=True)
        y = xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + EPS)
    else:
        y = x / np.sqrt((x * x).mean(-1, keepdims=True) + EPS)
    if f"{prefix}.weight" in params:
        y = y * params[f"{prefix}.weight"]
    if f"{prefix}.bias" in params:
        y = y + params[f"{prefix}.bias"]
    return y


def _linear(x: np.ndarray, params: dict, prefix: str) -> np.ndarray:
    y = x @ params[f"{prefix}.weight"].T
    return y + params[f"{prefix}.bias"] if f"{prefix}.bias" in params else y


def _attention(qkv: np.ndarray, n_head: int) -> np.ndarray:
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // n_head

    def heads(a: np.ndarray) -> np.ndarray:  # (B, T, C) -> (B, nh, T, hs): head h is columns h*hs:(h+1)*hs
        return a.reshape(B, T, n_head, hs).transpose(0, 2, 1, 3)
    q, k, v = heads(qkv[..., :C]), heads(qkv[..., C:2 * C]), heads(qkv[..., 2 * C:])
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
    scores = np.where(np.tril(np.ones((T, T), dtype=bool)), scores, -np.inf)  # a position sees itself and before
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    y = (scores / scores.sum(-1, keepdims=True)) @ v
    return y.transpose(0, 2, 1, 3).reshape(B, T, C)


def logits(params: dict[str, np.ndarray], cfg: GPTConfig, idx: np.ndarray) -> np.ndarray:
    """The GPT's logits (B, T, vocab) for tokens idx (B, T), in float64."""
    p = {name: np.asarray(a, dtype=np.float64) for name, a in params.items()}
    T = idx.shape[1]
    x = p["wte.weight"][idx] + p["wpe.weight"][:T]
    for i in range(cfg.n_layer):
        b = f"blocks.{i}"
        x = x + _linear(_attention(_linear(_norm(x, p, f"{b}.norm1", cfg), p, f"{b}.attn.qkv"), cfg.n_head),
                        p, f"{b}.attn.proj")
        h = _linear(_norm(x, p, f"{b}.norm2", cfg), p, f"{b}.mlp.fc")
        h = 0.5 * h * (1.0 + np.tanh(GELU_K * (h + GELU_A * h ** 3))) if cfg.act == "gelu" else np.maximum(h, 0.0)
        x = x + _linear(h, p, f"{b}.mlp.proj")
    x = _norm(x, p, "norm", cfg)
    return x @ (p["wte.weight"] if cfg.tie_weights else p["head.weight"]).T


def cross_entropy_sum(z: np.ndarray, targets: np.ndarray) -> float:
    """The summed cross-entropy of logits z (..., vocab) against targets (...)."""
    z = z - z.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(-np.take_along_axis(logp, targets[..., None], -1).sum())


def names_loss(params: dict[str, np.ndarray], test: list[list[int]], cfg: GPTConfig = NAMES_CFG) -> float:
    """Mean cross-entropy per character over the test names (chapter 9's held_out_loss)."""
    by_length: dict[int, list[list[int]]] = {}
    for tokens in test:
        by_length.setdefault(len(tokens), []).append(tokens)
    total, count = 0.0, 0
    for rows in by_length.values():
        rows_ = np.array(rows)
        total += cross_entropy_sum(logits(params, cfg, rows_[:, :-1]), rows_[:, 1:])
        count += rows_[:, 1:].size
    return total / count


def shakespeare_loss(params: dict[str, np.ndarray], batches: list[tuple[np.ndarray, np.ndarray]],
                     cfg: GPTConfig) -> float:
    """Mean cross-entropy per character over the validation batches (chapter 9's val_loss)."""
    return float(np.mean([cross_entropy_sum(logits(params, cfg, x), y) / y.size for x, y in batches]))
