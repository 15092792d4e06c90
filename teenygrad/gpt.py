"""Chapter 9: a GPT (decoder-only transformer) in teenygrad, read top to bottom like nanoGPT's model.py.

    tokens (B, T) -> token embedding + position embedding          (B, T, C)
                  -> n_layer blocks: x = x + attn(norm(x)); x = x + mlp(norm(x))
                  -> norm -> linear head                           (B, T, vocab)

Two configurations are used in the book (chapter 9): a tiny one on names (RMSNorm without weights, ReLU,
no biases) and a character-level Shakespeare model (LayerNorm, GELU, biases). The hot paths are fused
kernels (`teenygrad.functional`): linear, layer/RMS norm, causal self-attention, GELU, cross-entropy.
Generation can keep a KV cache: the keys and values of the tokens seen so far, so each new token costs
one position's work instead of a whole forward pass over the context.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from teenygrad import functional as F
from teenygrad import nn
from teenygrad.autograd import is_grad_enabled, no_grad
from teenygrad.edition import exercise
from teenygrad.tensor import Tensor, arange, tensor
from teenygrad.text import draw


@dataclass
class GPTConfig:
    vocab_size: int = 65
    block_size: int = 64    # the longest context the model sees (number of position embeddings)
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    norm: str = "layer"     # "layer" (LayerNorm) or "rms" (RMSNorm)
    norm_weights: bool = True  # learnable scale (and shift, with bias) in the norms
    act: str = "gelu"       # "gelu" or "relu"
    bias: bool = True       # biases in the linear layers and LayerNorms
    dropout: float = 0.0
    tie_weights: bool = True  # the output head reuses the token embedding matrix
    init_std: float = 0.02


class Norm(nn.Module):
    """LayerNorm or RMSNorm over the last dim, with or without learnable weights."""

    def __init__(self, cfg: GPTConfig) -> None:
        self.kind = cfg.norm
        if cfg.norm not in ("layer", "rms"):
            raise ValueError(f"GPTConfig.norm must be 'layer' or 'rms', got {cfg.norm!r}")
        self.weight = nn.init.ones_(nn.parameter(cfg.n_embd)) if cfg.norm_weights else None
        has_bias = cfg.norm_weights and cfg.bias and cfg.norm == "layer"
        self.bias = nn.init.zeros_(nn.parameter(cfg.n_embd)) if has_bias else None

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "layer":
            return F.layer_norm(x, self.weight, self.bias)
        return F.rms_norm(x, self.weight)


class CausalSelfAttention(nn.Module):
    """Every position looks at itself and the positions before it, in n_head heads of size C / n_head."""

    def __init__(self, cfg: GPTConfig) -> None:
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"n_embd ({cfg.n_embd}) must be a multiple of n_head ({cfg.n_head})")
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)  # q, k, v side by side
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.drop = nn.Dropout(cfg.dropout)

    @exercise("09-gpt", "model")
    def attention_forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """x (B, T, C) -> (B, T, C): the qkv projection (B, T, 3C); without a cache, fused causal self-attention
        over the T positions (`F.causal_self_attention`), with one, attention of the T new positions against the
        cache (`F.cached_attention` at start = cache.length, which writes their keys and values into it); then the
        output projection and dropout."""
        qkv = self.qkv(x)                                              # (B, T, 3C)
        if cache is None:
            y = F.causal_self_attention(qkv, self.n_head)              # (B, T, C), one fused kernel
        else:
            y = F.cached_attention(qkv, cache.k, cache.v, cache.length, self.n_head)  # (B, T, C)
        return self.drop(self.proj(y))

    forward = attention_forward


class KVCache:
    """One block's keys and values of the positions generated so far: k, v (B, nh, block_size, hs),
    filled up to `length`. The model writes the new positions' keys and values into it as it goes."""

    def __init__(self, cfg: GPTConfig, batch: int = 1) -> None:
        shape = (batch, cfg.n_head, cfg.block_size, cfg.n_embd // cfg.n_head)
        self.k, self.v = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
        self.length = 0


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.act = cfg.act
        if cfg.act not in ("gelu", "relu"):
            raise ValueError(f"GPTConfig.act must be 'gelu' or 'relu', got {cfg.act!r}")
        self.drop = nn.Dropout(cfg.dropout)

    @exercise("09-gpt", "model")
    def mlp_forward(self, x: Tensor) -> Tensor:
        """x (B, T, C) -> (B, T, C): fc to 4C, the activation (`F.gelu`, or relu), proj back to C, dropout."""
        h = self.fc(x)                                                 # (B, T, 4C)
        h = F.gelu(h) if self.act == "gelu" else h.relu()
        return self.drop(self.proj(h))                                 # (B, T, C)

    forward = mlp_forward


class Block(nn.Module):
    """Pre-norm residual block: each sub-layer reads a normalised copy and adds its result to x."""

    def __init__(self, cfg: GPTConfig) -> None:
        self.norm1, self.attn = Norm(cfg), CausalSelfAttention(cfg)
        self.norm2, self.mlp = Norm(cfg), MLP(cfg)

    @exercise("09-gpt", "model")
    def block_forward(self, x: Tensor, cache: KVCache | None = None) -> Tensor:
        """x (B, T, C) -> (B, T, C), pre-norm: x + attn(norm1(x), cache), then that plus mlp(norm2(that))."""
        x = x + self.attn(self.norm1(x), cache)
        return x + self.mlp(self.norm2(x))

    forward = block_forward


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)            # token embeddings
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)            # position embeddings
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.norm = Norm(cfg)
        self.head = None if cfg.tie_weights else nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.init_weights()

    @exercise("09-gpt", "model")
    def init_weights(self) -> None:
        """Called by __init__. Normal(0, init_std) for every matrix (embeddings included), in named_parameters
        order, zeros for biases, norm weights left at one; the projections that write into the residual stream
        (attn.proj.weight, mlp.proj.weight) get std / sqrt(2 n_layer): 2 n_layer of them add into the stream, so
        its variance at the top does not grow with depth."""
        std = self.cfg.init_std
        for name, p in self.named_parameters():
            if p.ndim == 2:
                resid = name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight")
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * self.cfg.n_layer) if resid else std)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    @exercise("09-gpt", "model")
    def gpt_forward(self, idx: Tensor, targets: Tensor | None = None, caches: list | None = None,
                    start: int = 0) -> tuple[Tensor, Tensor | None]:
        """idx (B, T) int64 -> (logits (B, T, vocab), mean cross-entropy against targets (B, T) or None).

        The tokens sit at positions start..start+T-1: x = wte(idx) + wpe(those positions), dropout, the blocks in
        order (block i with caches[i]), the final norm, then the head: the token embedding matrix itself when the
        weights are tied (logits = x wte^T), else head's. ValueError when start + T > block_size. With `caches`
        (one KVCache per block, for generation) idx holds the tokens after the first `start`, which the caches
        hold: ValueError unless start == caches[0].length and autograd is off (no_grad); after the blocks, every
        cache's length grows by T. Both checks come before any cache changes (either may come first)."""
        B, T = idx.shape
        if start + T > self.cfg.block_size:
            raise ValueError(f"GPT: {start + T} positions but block_size is {self.cfg.block_size}")
        x = self.wte(idx) + self.wpe(arange(start, start + T, device=idx.device))  # (B, T, C)
        x = self.drop(x)
        if caches is not None and (start != caches[0].length or is_grad_enabled()):
            raise ValueError("GPT: a KV cache is for generation: call under no_grad(), with start = cache.length")
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        if caches is not None:
            for cache in caches:
                cache.length += T
        x = self.norm(x)
        logits = F.linear(x, self.wte.weight if self.head is None else self.head.weight)  # (B, T, vocab)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))

    forward = gpt_forward

    @no_grad()
    @exercise("09-gpt", "generate")
    def generate(self, idx: Tensor | list, max_new_tokens: int, temperature: float = 1.0,
                 rng: np.random.Generator | None = None, use_cache: bool = True) -> list[int]:
        """Continue the sequence `idx` (one sequence) by sampling, `max_new_tokens` times. Returns the
        new tokens (a list of ints), each from `next_token` on the logits of the last position, with the model
        in eval mode (its training mode restored after). The context fed to the model is the last block_size
        tokens (a longer prompt is cropped, no error). With the KV cache each step feeds only the newest token;
        once the context is full, and without a cache, the whole (cropped) context is run again: the same tokens
        either way."""
        rng = rng or np.random.default_rng()
        ctx = list(idx.tolist() if isinstance(idx, Tensor) else idx)
        was_training = self.training
        self.eval()
        out: list[int] = []
        caches, fed = None, 0
        for _ in range(max_new_tokens):
            if use_cache and fed + 1 <= self.cfg.block_size:
                if caches is None:
                    caches = [KVCache(self.cfg) for _ in self.blocks]
                    new = ctx[-self.cfg.block_size:]
                    logits, _ = self(tensor([new]), caches=caches, start=0)
                    fed = len(new)
                else:
                    logits, _ = self(tensor([ctx[-1:]]), caches=caches, start=fed)
                    fed += 1
            else:  # no cache, or the context is full (every position shifts: nothing cached still holds):
                window = ctx[-self.cfg.block_size:]  # run the last block_size tokens again, fused
                logits, _ = self(tensor([window]))
                fed = len(window) if use_cache else 0
            nxt = next_token(logits[0, -1], temperature, rng)
            ctx.append(nxt)
            out.append(nxt)
        self.train(was_training)
        return out


@exercise("09-gpt", "generate")
def next_token(logits: Tensor, temperature: float, rng: np.random.Generator) -> int:
    """One token from logits (vocab,): argmax at temperature 0, else a draw from softmax(logits / t)."""
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    if temperature == 0:
        return int(logits.argmax().item())
    return int(draw(logits.reshape(1, -1), [rng.random()], temperature).item())  # chapter 8's inverse CDF
