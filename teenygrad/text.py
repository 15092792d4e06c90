"""Characters as tokens, for the language models of chapters 8 and 9 (`from teenygrad import text`).

A character-level language model predicts the next symbol from the ones before it. This module holds what
those models share: a vocabulary that maps symbols to integer ids and back (`Vocab`), the training pairs
(context window -> next id) cut from a list of words (`windows`), a seeded train/dev/test split of the words
(`split`), the bigram count matrix (`bigram_counts`), its smoothed probabilities (`smoothed`) and their
loss on pairs (`bigram_nll`), and drawing from a model one symbol at a time with a
temperature, optionally only among the k likeliest ids or the nucleus of probability p (`draw`, `sample`).
numpy prepares data; the arithmetic runs in teenygrad's Tensor ops.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from teenygrad import nn
from teenygrad.autograd import no_grad
from teenygrad.classification import one_hot
from teenygrad.edition import exercise
from teenygrad.tensor import Tensor, arange, float32, int64, tensor

__all__ = ["BOUNDARY", "Vocab", "windows", "split", "bigram_counts", "smoothed", "bigram_nll", "top_k_logits",
           "top_p_logits", "draw", "sample", "MLPLanguageModel", "evaluate"]

BOUNDARY = "."  # marks both the start and the end of a word: one symbol, id 0


class Vocab:
    """A bijection between symbols (one character each) and the ids 0, 1, ..., len - 1.

    `Vocab.build(names)` gives the boundary "." id 0 and the other characters, sorted, ids 1, 2, ...:
    for lowercase names, "." = 0, "a" = 1, ..., "z" = 26, 27 symbols in all.
    """

    def __init__(self, symbols: Sequence[str]) -> None:
        if len(set(symbols)) != len(symbols) or any(len(s) != 1 for s in symbols):
            raise ValueError("Vocab: symbols must be distinct single characters")
        self.itos: list[str] = list(symbols)
        self.stoi: dict[str, int] = {s: i for i, s in enumerate(self.itos)}

    @classmethod
    @exercise("08-language-models", "vocab")
    def build(cls, texts: Sequence[str], boundary: str | None = BOUNDARY) -> Vocab:
        """The characters of `texts`, sorted, after the boundary symbol (if any), which gets id 0."""
        chars = sorted(set("".join(texts)) - {boundary})
        return cls(([boundary] if boundary is not None else []) + chars)

    def __len__(self) -> int:
        return len(self.itos)

    @exercise("08-language-models", "vocab")
    def encode(self, s: str) -> np.ndarray:
        """The ids of the characters of s, an int64 array (a KeyError names a symbol not in the vocabulary)."""
        try:
            return np.array([self.stoi[c] for c in s], dtype=np.int64)
        except KeyError as e:
            raise KeyError(f"Vocab.encode: {e.args[0]!r} is not in the vocabulary") from None

    @exercise("08-language-models", "vocab")
    def decode(self, ids: Sequence[int] | np.ndarray | Tensor) -> str:
        """The string of the ids (a Tensor, an array or a list of ints)."""
        ids = ids.numpy() if isinstance(ids, Tensor) else ids
        return "".join(self.itos[int(i)] for i in np.asarray(ids).reshape(-1))

    def __repr__(self) -> str:
        return f"Vocab({''.join(self.itos)!r})"


@exercise("08-language-models", "windows")
def windows(words: Sequence[str], vocab: Vocab, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (context -> next id) pair of `words`, as X (n, block_size) and Y (n,), both int64.

    Each word w is read as  . . . w_1 w_2 ... w_L .  (block_size boundaries before it, one after), and every
    position gives one pair: the block_size ids before it predict it. A word of length L gives L + 1 pairs;
    block_size = 1 gives the bigrams (previous id, next id).
    """
    if block_size < 1:
        raise ValueError(f"windows: block_size must be at least 1, got {block_size}")
    pad = np.zeros(block_size, dtype=np.int64)
    xs, ys = [], []
    for w in words:
        ids = np.concatenate([pad, vocab.encode(w), pad[:1]])
        xs.append(np.lib.stride_tricks.sliding_window_view(ids[:-1], block_size))
        ys.append(ids[block_size:])
    if not xs:
        return np.zeros((0, block_size), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(xs), np.concatenate(ys)


@exercise("08-language-models", "split")
def split(items: Sequence, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0) -> tuple[list, ...]:
    """Shuffle `items` with `seed`, then cut them into consecutive parts of the given fractions (train, dev,
    test). Deterministic: the same seed gives the same parts. Part k ends at round(n * (f_0 + ... + f_k))."""
    if abs(sum(fractions) - 1) > 1e-9 or any(f < 0 for f in fractions):
        raise ValueError(f"split: fractions must be non-negative and add up to 1, got {fractions}")
    order = np.random.default_rng(seed).permutation(len(items))
    ends = [int(round(len(items) * c)) for c in np.cumsum(fractions)]
    starts = [0] + ends[:-1]
    return tuple([items[i] for i in order[a:b]] for a, b in zip(starts, ends))


@exercise("08-language-models", "bigram")
def bigram_counts(first: np.ndarray | Tensor, second: np.ndarray | Tensor, num: int) -> Tensor:
    """N (num, num) float32, N[a, b] = how many i have first[i] = a and second[i] = b.

    One matrix product: N = onehot(first)^T onehot(second), since entry (a, b) adds 1 for exactly those rows.
    The counts are exact in float32 up to 2^24 pairs.
    """
    return one_hot(first, num).T @ one_hot(second, num)  # chapter 4's one_hot


@exercise("08-language-models", "bigram")
def smoothed(counts: Tensor, alpha: float) -> Tensor:
    """The bigram probabilities P_alpha(b | a) = (N_ab + alpha) / (sum_b' N_ab' + V alpha) of the counts
    N = `counts` (V, V): a new float32 (V, V) Tensor whose rows sum to 1. alpha >= 0 (ValueError otherwise);
    with alpha = 0 a row of zero counts has no distribution (ValueError naming the row)."""
    if not alpha >= 0:
        raise ValueError(f"smoothed: alpha must be >= 0, got {alpha!r}")
    padded = counts.to(float32) + float(alpha)
    totals = padded.sum(axis=1, keepdim=True)
    empty = np.flatnonzero(totals.numpy() == 0)
    if empty.size:
        raise ValueError(f"smoothed: row {int(empty[0])} has no counts; smooth with alpha > 0")
    return padded / totals


@exercise("08-language-models", "bigram")
def bigram_nll(probs: Tensor, first: np.ndarray | Tensor, second: np.ndarray | Tensor) -> float:
    """The mean negative log-likelihood -mean_i log probs[first[i], second[i]] of the pairs, a float (natural
    log; inf when a pair has probability 0; nan for no pairs)."""
    first = first if isinstance(first, Tensor) else tensor(np.asarray(first, dtype=np.int64))
    second = second if isinstance(second, Tensor) else tensor(np.asarray(second, dtype=np.int64))
    rows = probs.to(float32).log()[first.reshape(-1)]
    return -rows.gather(1, second.reshape(-1, 1)).mean().item()


@exercise("08-language-models", "top_k_logits")
def top_k_logits(logits: Tensor, k: int) -> Tensor:
    """Top-k filtering: `logits` (n, V) with every entry that is not among the k largest of its row set to
    -inf (a new Tensor of logits' shape and dtype; the kept entries unchanged). An entry is kept when fewer
    than k entries of its row are strictly larger, so ties with the k-th largest are all kept; k >= V keeps
    everything. k must be an integer >= 1 (ValueError otherwise)."""
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"top_k_logits: k must be an integer >= 1, got {k!r}")
    larger = (logits.unsqueeze(1) > logits.unsqueeze(2)).sum(axis=2)  # [i, j]: entries of row i above z_ij
    keep = (larger < int(k)).to(logits.dtype)
    return logits + keep.log()  # log 1 = 0 keeps a logit, log 0 = -inf drops it


@exercise("08-language-models", "top_p_logits")
def top_p_logits(logits: Tensor, top_p: float) -> Tensor:
    """Nucleus (top-p) filtering: `logits` (n, V) with every entry outside its row's nucleus set to -inf (a new
    Tensor of logits' shape and dtype; the kept entries unchanged). With p = softmax(row), id j is in the
    nucleus when the ids strictly more likely than j have a total probability below top_p: the nucleus is the
    smallest set of most likely ids whose probability reaches top_p (ties with its least likely id kept too,
    the most likely id always). top_p must be in (0, 1] (ValueError otherwise); 1 filters nothing, decided without
    summing (the others' probabilities can add up to exactly 1.0 in floating point and drop a tiny one)."""
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p_logits: top_p must be in (0, 1], got {top_p!r}")
    if top_p == 1:
        return logits + 0.0  # a new Tensor: the -inf entries (filtered out before) stay -inf
    p = logits.softmax(-1)
    above = (logits.unsqueeze(1) > logits.unsqueeze(2)).to(p.dtype)  # [i, j, l]: is z_il > z_ij
    mass_above = (above * p.unsqueeze(1)).sum(axis=2)                # [i, j]: probability of the ids above j
    keep = (mass_above < top_p).to(logits.dtype)
    return logits + keep.log()


@exercise("08-language-models", "draw")
def draw(logits: Tensor, u: Tensor | np.ndarray, temperature: float = 1.0, top_k: int | None = None,
         top_p: float | None = None) -> Tensor:
    """One id per row of `logits` (n, V), by the inverse CDF: with p = softmax(logits / temperature) and the
    cumulative sums c_k = p_0 + ... + p_k, row i gets the smallest k with u_i < c_k, for u_i uniform in [0, 1).
    With top_k and/or top_p, the scaled logits are filtered first (`top_k_logits`, then `top_p_logits`): ids
    outside get probability 0 and are never drawn.

    Counting the c_k (k < V - 1) that are <= u_i gives that k, and never more than V - 1, even if rounding
    leaves c_{V-1} a hair below u_i; with filtering, the count stops before the row's last id of probability
    > 0, for the same reason. Temperature < 1 sharpens the distribution, > 1 flattens it.
    """
    if temperature <= 0:
        raise ValueError(f"draw: temperature must be positive, got {temperature}")
    z = logits.to(float32) * (1.0 / temperature)
    if top_k is not None:
        z = top_k_logits(z, top_k)
    if top_p is not None:
        z = top_p_logits(z, top_p)
    p = z.softmax(-1)
    V = p.shape[-1]
    upper = tensor(np.triu(np.ones((V, V), dtype=np.float32)))  # c = p @ upper: c_k = sum_{j <= k} p_j
    u = u if isinstance(u, Tensor) else tensor(np.asarray(u, dtype=np.float32))
    below = (p @ upper <= u.to(float32).reshape(-1, 1)).to(float32)
    if top_k is None and top_p is None:
        return below[:, :V - 1].sum(axis=1).to(int64)
    ids = arange(V).to(float32)
    last = ((p > 0).to(float32) * ids).max(axis=1, keepdim=True)  # the row's last id that can be drawn
    return (below * (ids < last).to(float32)).sum(axis=1).to(int64)


@no_grad()
@exercise("08-language-models", "sample")
def sample(next_logits: Callable[[Tensor], Tensor], vocab: Vocab, n: int, block_size: int,
           temperature: float = 1.0, generator: np.random.Generator | None = None, max_len: int = 50) -> list[str]:
    """n words drawn from a model, all at once: start from a context of boundaries, draw the next id from
    `next_logits(context)` ((n, block_size) int64 -> (n, V) logits), shift it into the context, and stop a
    word at its first boundary (or after max_len symbols). Returns the words without the boundary."""
    if vocab.itos[0] != BOUNDARY:
        raise ValueError(f"sample: the vocabulary needs the boundary {BOUNDARY!r} as id 0 to end a word")
    rng = generator if generator is not None else np.random.default_rng()
    context = np.zeros((n, block_size), dtype=np.int64)
    out = np.zeros((n, max_len), dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    for t in range(max_len):
        ids = draw(next_logits(tensor(context)), rng.random(n), temperature).numpy()
        out[:, t] = np.where(alive, ids, 0)
        alive &= ids != 0
        if not alive.any():
            break
        context = np.concatenate([context[:, 1:], ids[:, None]], axis=1)
    return [vocab.decode(row).split(BOUNDARY, 1)[0] for row in out]


class MLPLanguageModel(nn.Module):
    """Chapter 8's model (Bengio et al., 2003): the embeddings of the block_size ids before a position, side by
    side, through a tanh layer to the logits of the next id. X (n, block_size) int64 ids -> logits (n, vocab)."""

    @exercise("08-language-models", "mlp")
    def __init__(self, vocab_size: int, emb_dim: int, hidden: int, block_size: int) -> None:
        """Three layers, created in this order (so that a seed gives the book's weights): `embedding`
        (vocab_size, emb_dim), `hidden` (block_size * emb_dim -> hidden), `out` (hidden -> vocab_size); then
        initialised: hidden's weight Kaiming-normal for tanh and its bias zero, out's weight normal with std 0.01
        (nearly uniform first predictions) and its bias zero."""
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.hidden = nn.Linear(block_size * emb_dim, hidden)
        self.out = nn.Linear(hidden, vocab_size)
        nn.init.kaiming_normal_(self.hidden.weight, "tanh")
        nn.init.zeros_(self.hidden.bias)
        nn.init.normal_(self.out.weight, std=0.01)
        nn.init.zeros_(self.out.bias)

    @exercise("08-language-models", "mlp")
    def forward(self, X: np.ndarray | Tensor) -> Tensor:
        """The logits (n, vocab) of X (n, block_size) int ids (an array or a Tensor): each row's block_size embeddings
        side by side (the first id's first), then hidden, tanh and out, in Tensor ops so that backward reaches every
        parameter."""
        X = X if isinstance(X, Tensor) else tensor(np.asarray(X, dtype=np.int64))
        e = self.embedding(X)                                   # (n, block_size, emb_dim)
        return self.out(self.hidden(e.reshape(X.shape[0], -1)).tanh())


@no_grad()
@exercise("08-language-models", "evaluate")
def evaluate(model: Callable[[Tensor], Tensor], X: np.ndarray | Tensor, Y: np.ndarray | Tensor,
             batch_size: int | None = None) -> float:
    """The mean cross-entropy of model(X) against the ids Y over all rows, a float, without recording a graph:
    the whole split at once, or (batch_size given, >= 1) batch by batch in order, each batch's mean weighted by its
    rows, so that a split too large for memory gives the same mean. ValueError for no rows or a batch_size < 1."""
    X = X if isinstance(X, Tensor) else tensor(np.asarray(X, dtype=np.int64))
    Y = Y if isinstance(Y, Tensor) else tensor(np.asarray(Y, dtype=np.int64))
    n = X.shape[0]
    if n == 0 or (batch_size is not None and batch_size < 1):
        raise ValueError(f"evaluate: need at least one row and a batch_size >= 1, got {n} rows, {batch_size}")
    step = n if batch_size is None else int(batch_size)
    total = 0.0
    for start in range(0, n, step):
        stop = min(start + step, n)
        total += model(X[start:stop]).cross_entropy(Y[start:stop]).item() * (stop - start)
    return total / n
