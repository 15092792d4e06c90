"""Chapter 8's pieces: teenygrad.text against brute-force oracles, the 08-language-models judge against
independent oracles and the solutions notebook, and the figures the chapter's prose states."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import teenygrad as tg
from teenygrad import text
from teenygrad.datasets import load_names

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "08-language-models.ipynb"

NAMES = load_names()
VOCAB = text.Vocab.build(NAMES)
words = st.lists(st.text(alphabet="abcxyz", min_size=1, max_size=8), max_size=6)


# --- teenygrad.text ----------------------------------------------------------------------------------------

def test_vocab_of_the_names():
    assert len(NAMES) == 32_257 and len(VOCAB) == 27
    assert VOCAB.itos == list(".abcdefghijklmnopqrstuvwxyz") and VOCAB.stoi["."] == 0 and VOCAB.stoi["z"] == 26
    ids = VOCAB.encode("emma")
    assert ids.dtype == np.int64 and ids.tolist() == [5, 13, 13, 1]
    assert VOCAB.decode(ids) == VOCAB.decode(tg.tensor(ids)) == VOCAB.decode(ids.tolist()) == "emma"
    with pytest.raises(KeyError, match="'A'"):
        VOCAB.encode("Anna")
    with pytest.raises(ValueError):
        text.Vocab(["a", "a"])
    plain = text.Vocab.build(["hello world"], boundary=None)
    assert plain.itos == [" ", "d", "e", "h", "l", "o", "r", "w"]


@settings(deadline=None, max_examples=60)
@given(words, st.integers(1, 4))
def test_windows_against_a_loop(ws, block_size):
    X, Y = text.windows(ws, VOCAB, block_size)
    want_x, want_y = [], []
    for w in ws:
        context = ["."] * block_size
        for ch in w + ".":
            want_x.append([VOCAB.stoi[c] for c in context])
            want_y.append(VOCAB.stoi[ch])
            context = context[1:] + [ch]
    assert X.dtype == Y.dtype == np.int64 and X.shape == (len(want_y), block_size) and Y.shape == (len(want_y),)
    assert X.tolist() == want_x and Y.tolist() == want_y
    with pytest.raises(ValueError):
        text.windows(ws, VOCAB, 0)


def test_split_is_seeded_disjoint_and_complete():
    train, dev, test = text.split(NAMES)
    assert (len(train), len(dev), len(test)) == (25_806, 3_225, 3_226)
    assert sorted(train + dev + test) == sorted(NAMES)
    assert text.split(NAMES) == (train, dev, test) and text.split(NAMES, seed=1) != (train, dev, test)
    order = np.random.default_rng(0).permutation(len(NAMES))
    assert train[:3] == [NAMES[i] for i in order[:3]]
    assert text.split(list(range(10)), (0.5, 0.5), seed=3) == tuple(
        [int(i) for i in part] for part in np.split(np.random.default_rng(3).permutation(10), [5]))
    with pytest.raises(ValueError):
        text.split(NAMES, (0.5, 0.4))


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 9), st.integers(0, 300), st.integers(0, 2**31))
def test_bigram_counts_against_add_at(num, n, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, num, size=n), rng.integers(0, num, size=n)
    want = np.zeros((num, num))
    np.add.at(want, (a, b), 1)
    got = text.bigram_counts(a, b, num)
    assert got.dtype == tg.float32 and got.shape == (num, num)
    np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(text.bigram_counts(tg.tensor(a), tg.tensor(b), num).numpy(), want)


def _inverse_cdf(logits: np.ndarray, u: np.ndarray, temperature: float) -> np.ndarray:
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max(axis=1, keepdims=True))
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    return np.minimum((cdf <= u[:, None]).sum(axis=1), logits.shape[1] - 1), cdf


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 30), st.integers(1, 12), st.sampled_from([0.1, 0.5, 1.0, 2.0, 10.0]), st.integers(0, 2**31))
def test_draw_is_the_inverse_cdf(n, num, temperature, seed):
    rng = np.random.default_rng(seed)
    logits, u = (rng.normal(size=(n, num)) * 3).astype(np.float32), rng.random(n)
    got = text.draw(tg.tensor(logits), u, temperature)
    assert got.dtype == tg.int64 and got.shape == (n,)
    want, cdf = _inverse_cdf(logits, u, temperature)
    near = np.abs(cdf - u[:, None]).min(axis=1) < 1e-5  # float32 rounding may move a draw across a boundary
    assert np.array_equal(got.numpy()[~near], want[~near])
    with pytest.raises(ValueError):
        text.draw(tg.tensor(logits), u, 0.0)


def test_draw_frequencies_and_temperature():
    logits = tg.tensor([[2.0, 1.0, 0.0, -1.0]])
    u = np.random.default_rng(0).random(40_000)
    for temperature in (0.5, 1.0, 3.0):
        drawn = text.draw(logits[[0] * len(u)], u, temperature).numpy()
        p = np.exp(np.array([2.0, 1.0, 0.0, -1.0]) / temperature)
        p /= p.sum()
        freq = np.bincount(drawn, minlength=4) / len(u)
        assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / len(u)) + 1e-9), (temperature, freq, p)
    big = tg.tensor([[1000.0, 0.0, -1000.0]])  # stable: no overflow, the argmax at a low temperature
    assert text.draw(big, [0.99], 0.01).item() == 0


def test_sample_from_a_counting_model():
    X, Y = text.windows(NAMES[:2000], VOCAB, 1)
    N = text.bigram_counts(X[:, 0], Y, 27)
    logits = (N + 1).log()
    got = text.sample(lambda c: logits[c[:, 0]], VOCAB, 50, 1, generator=np.random.default_rng(0))
    again = text.sample(lambda c: logits[c[:, 0]], VOCAB, 50, 1, generator=np.random.default_rng(0))
    assert got == again and len(got) == 50 and all(set(w) <= set(VOCAB.itos[1:]) for w in got)
    assert 4 < np.mean([len(w) for w in got]) < 9  # names of about the right length
    ab = text.Vocab(list(".ab"))  # a model that always says "a" after ".", then "." after "a"
    table = tg.tensor([[-50.0, 50.0, -50.0], [50.0, -50.0, -50.0], [0.0, 0.0, 0.0]])
    assert text.sample(lambda c: table[c[:, -1]], ab, 3, 2, generator=np.random.default_rng(1)) == ["a"] * 3
    with pytest.raises(ValueError, match="boundary"):
        text.sample(lambda c: table[c[:, -1]], text.Vocab(list("ab.")), 1, 1)
