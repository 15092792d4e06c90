"""Chapter 8's pieces: teenygrad.text against brute-force oracles, the 08-language-models judge against
independent oracles and the solutions notebook, and the figures the chapter's prose states."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _top_k(z: np.ndarray, k: int) -> np.ndarray:
    """The k largest of each row kept (ties with the k-th kept too), by sorting: a second way to the same set."""
    kth = -np.sort(-z, axis=1)[:, min(k, z.shape[1]) - 1:min(k, z.shape[1])]
    return np.where(z >= kth, z, -np.inf)


def _nucleus(z: np.ndarray, top_p: float) -> np.ndarray:
    """The nucleus of each row, by sorting: walk the ids from the most likely, keep them until the probability
    kept reaches top_p, then keep the ids tied with the last one kept."""
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    out = np.full_like(z, -np.inf)
    for i in range(len(z)):
        kept, last = 0.0, np.inf
        for j in np.argsort(-z[i], kind="stable"):
            if kept >= top_p and z[i, j] < last:
                break
            out[i, j], kept, last = z[i, j], kept + p[i, j], z[i, j]
    return out


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 8), st.integers(1, 30), st.integers(1, 35), st.booleans(), st.integers(0, 2**31))
def test_top_k_logits_against_sorting(n, V, k, ties, seed):
    rng = np.random.default_rng(seed)
    z = rng.integers(-3, 3, size=(n, V)).astype(np.float64) if ties else rng.normal(size=(n, V)) * 2
    got = text.top_k_logits(tg.tensor(z), k)
    assert got.dtype == tg.float64 and got.shape == (n, V)
    np.testing.assert_array_equal(got.numpy(), _top_k(z, k))
    assert np.array_equal(text.top_k_logits(tg.tensor(z, dtype=tg.float32), k).numpy(), _top_k(z, k).astype(np.float32))


@settings(deadline=None, max_examples=40)
@given(st.integers(1, 8), st.integers(1, 30), st.floats(0.01, 1.0), st.booleans(), st.integers(0, 2**31))
def test_top_p_logits_against_sorting(n, V, top_p, ties, seed):
    rng = np.random.default_rng(seed)
    z = rng.integers(-3, 3, size=(n, V)).astype(np.float64) if ties else rng.normal(size=(n, V)) * 2
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    cum = np.cumsum(-np.sort(-p, axis=1), axis=1)
    if np.abs(cum - top_p).min() < 1e-9:
        return  # the threshold on a boundary: either answer is a rounding away
    got = text.top_p_logits(tg.tensor(z), top_p)
    np.testing.assert_array_equal(got.numpy(), _nucleus(z, top_p))


def test_filters_refuse_bad_arguments_and_keep_minus_infinity():
    z = tg.tensor([[1.0, 0.0, -np.inf]])
    for k in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="k must be"):
            text.top_k_logits(z, k)
    for top_p in (0.0, -0.5, 1.01):
        with pytest.raises(ValueError, match="top_p must be"):
            text.top_p_logits(z, top_p)
    assert np.isneginf(text.top_p_logits(z, 1.0).numpy()[0, 2]) and np.isneginf(text.top_k_logits(z, 3).numpy()[0, 2])


@settings(deadline=None, max_examples=30)
@given(st.integers(1, 40), st.integers(2, 12), st.integers(1, 5), st.floats(0.05, 1.0), st.integers(0, 2**31))
def test_draw_with_filters_never_draws_a_filtered_id(n, V, k, top_p, seed):
    """Filtered ids (at the end of the row too) are never drawn, however close u is to 1."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, V)).astype(np.float32) * 3
    u = np.concatenate([rng.random(n - 1), [1 - 1e-9]])
    filtered = _nucleus(_top_k(logits.astype(np.float64), k), top_p)
    got = text.draw(tg.tensor(logits), u, 1.0, top_k=k, top_p=top_p).numpy()
    assert np.all(np.isfinite(filtered[np.arange(n), got]))


def test_draw_with_filters_has_the_filtered_frequencies():
    logits = np.repeat([[2.0, 1.0, 0.5, 0.0, -1.0]], 40_000, axis=0)
    u = np.random.default_rng(0).random(len(logits))
    for kw, keep in [({"top_k": 2}, [0, 1]), ({"top_p": 0.6}, [0, 1]), ({"top_k": 3, "top_p": 0.99}, [0, 1, 2])]:
        freq = np.bincount(text.draw(tg.tensor(logits), u, 1.0, **kw).numpy(), minlength=5) / len(u)
        p = np.zeros(5)
        p[keep] = np.exp(logits[0, keep])
        p /= p.sum()
        assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / len(u)) + 1e-9), (kw, freq, p)


@settings(deadline=None, max_examples=40)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.integers(0, 2), st.integers(0, 6), st.integers(0, 2**31))
def test_index_select_gradient_against_add_at(shape, axis, n, seed):
    """index_add, index_select's backward: any axis, repeated and negative ids, float32 and float64."""
    rng = np.random.default_rng(seed)
    axis = min(axis, len(shape) - 1)
    index = rng.integers(-shape[axis], shape[axis], size=n)
    g = rng.normal(size=(*shape[:axis], n, *shape[axis + 1:]))
    want = np.zeros(shape)
    np.add.at(want, (slice(None),) * axis + (index % shape[axis],), g)
    for dtype in (tg.float64, tg.float32):
        x = tg.tensor(rng.normal(size=shape), dtype=dtype, requires_grad=True)
        out = x.index_select(axis, tg.tensor(index))
        out.backward(tg.tensor(g, dtype=dtype))
        got = np.zeros(shape) if x.grad is None else x.grad.numpy()
        assert x.grad is None or x.grad.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == tg.float32 else 1e-12, atol=1e-6)


# --- the 08-language-models judge -----------------------------------------------------------------------------

from autograder.judges.language_models import (  # noqa: E402
    MLP_NAMES,
    PARTS,
    SAMPLE_TOL,
    TRAIN_ARGS,
    TRAIN_TARGET,
    _check_draws,
    _index_add_reference,
    _mass_above,
    inverse_cdf,
    mlp_init,
    mlp_reference,
    sample_reference,
    split_reference,
    train_reference,
    vocab_symbols,
    windows_reference,
)

from conftest import book_figures, notebook_namespace, replacing, run_hidden, solution_cells  # noqa: E402
from installing import pieces_from  # noqa: E402

SOLUTIONS = REPO / "solutions" / "08-language-models.ipynb"
ASSIGNMENT = "08-language-models"
POINTS = {"vocab": 2, "split": 1, "windows": 2, "bigram": 3, "draw": 3, "sample": 2, "index_add": 4, "mlp": 2,
          "evaluate": 2, "top_k_logits": 2, "top_p_logits": 3}


def test_judge_references_against_teenygrad():
    rng = np.random.default_rng(0)
    for case in PARTS["index_add"].cases(rng):
        if len(case) == 4:
            W, axis, index, g = case
            x = tg.tensor(W, requires_grad=True)
            x.index_select(axis, tg.tensor(index)).backward(tg.tensor(g))
            got = np.zeros(W.shape) if x.grad is None else x.grad.numpy()
            np.testing.assert_allclose(got, _index_add_reference(W, axis, index, g), rtol=1e-12, atol=1e-12)
            assert PARTS["index_add"].check(case, (got,)) is None
            if np.abs(got).max() > 0:
                assert PARTS["index_add"].check(case, (got * 1.01,)) is not None
    for name, f in [("top_k_logits", text.top_k_logits), ("top_p_logits", text.top_p_logits)]:
        for logits, arg, u in PARTS[name].cases(rng):
            check = PARTS[name].check
            if (name == "top_k_logits" and arg < 1) or (name == "top_p_logits" and not 0 < arg <= 1):
                with pytest.raises(ValueError):
                    f(tg.tensor(logits), arg)
                assert check((logits, arg, u), (np.int64(1),)) is None
                assert check((logits, arg, u), (np.int64(0),)) is not None
                continue
            kw = {"top_k": arg} if name == "top_k_logits" else {"top_p": arg}
            filtered, drawn = f(tg.tensor(logits), arg).numpy(), text.draw(tg.tensor(logits), u, 1.0, **kw).numpy()
            assert check((logits, arg, u), (filtered, drawn)) is None, name
            if (np.isfinite(filtered) != np.isfinite(logits)).any():  # keeping everything is wrong wherever the filter drops something
                assert check((logits, arg, u), (np.asarray(logits, np.float64), drawn)) is not None


def test_vocab_split_and_windows_references_against_teenygrad():
    rng = np.random.default_rng(6)
    for texts, boundary, probe, ids, unknown in PARTS["vocab"].cases(rng):
        texts = [str(t) for t in texts]
        v = text.Vocab.build(texts) if boundary == "default" else text.Vocab.build(texts, boundary or None)
        assert v.itos == vocab_symbols(texts, boundary)
        outputs = (np.array(v.itos), np.int64(1), v.encode(probe), np.int64(1), np.array([v.decode(ids)] * 3),
                   np.int64(1))
        assert PARTS["vocab"].check((texts, boundary, probe, ids, unknown), outputs) is None
        with pytest.raises(KeyError):
            v.encode(unknown)
    for items, fractions, seed in PARTS["split"].cases(rng):
        items = np.atleast_1d(items).tolist()
        if np.size(fractions) and (abs(np.sum(fractions) - 1) > 1e-9 or np.min(fractions) < 0):
            with pytest.raises(ValueError):
                text.split(items, tuple(fractions), seed)
            continue
        got = text.split(items) if not np.size(fractions) else text.split(items, tuple(fractions), seed)
        assert [list(p) for p in got] == split_reference(items, fractions, seed)
    for symbols, words, block in PARTS["windows"].cases(rng):
        if block < 1:
            continue
        X, Y = text.windows([str(w) for w in words], text.Vocab(list(symbols)), int(block))
        want_x, want_y = windows_reference(symbols, words, int(block))
        assert np.array_equal(X, want_x) and np.array_equal(Y, want_y) and X.shape == want_x.shape


def test_mlp_reference_is_teenygrads_model():
    """The judge's initial weights are those tg.manual_seed gives text.MLPLanguageModel, and its hand-written
    forward and backward match teenygrad's autograd."""
    rng = np.random.default_rng(7)
    for V, d, h, block, seed, X, Y, _ in PARTS["mlp"].cases(rng):
        tg.manual_seed(seed)
        model = text.MLPLanguageModel(V, d, h, block)
        assert [n for n, _ in model.named_parameters()] == MLP_NAMES
        want = mlp_init(V, d, h, block, seed)
        for p, w in zip(model.parameters(), want):
            np.testing.assert_allclose(p.numpy(), w, rtol=1e-6, atol=0)
        model.to(tg.float64)
        logits = model(X)
        logits.cross_entropy(tg.tensor(Y)).backward()
        ref_logits, ref_grads = mlp_reference([p.numpy() for p in model.parameters()], X, Y)
        np.testing.assert_allclose(logits.numpy(), ref_logits, rtol=1e-10, atol=1e-12)
        for p, g in zip(model.parameters(), ref_grads):
            np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-9, atol=1e-12)


def test_sample_reference_is_text_sample_on_the_graders_draw():
    rng = np.random.default_rng(8)

    def draw(logits, u, temperature=1.0, top_k=None, top_p=None):
        return tg.tensor(inverse_cdf(logits.numpy().astype(np.float64) / temperature, np.asarray(u)))

    for symbols, A_, B_, n, block, T, seed, max_len in PARTS["sample"].cases(rng):
        calls = []

        def model(context):
            calls.append(1)
            c = context.numpy()
            return tg.tensor(A_[c[:, -1]] + B_[c[:, 0]])

        vocab = text.Vocab(list(symbols))
        with tg.edition.installed(ASSIGNMENT, "draw", draw):
            if symbols[0] != ".":
                with pytest.raises(ValueError):
                    text.sample(model, vocab, n, block, T, np.random.default_rng(seed), max_len)
                continue
            words = text.sample(model, vocab, n, block, T, np.random.default_rng(seed), max_len)
        assert (words, len(calls)) == sample_reference(symbols, A_, B_, n, block, T, seed, max_len)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_books_own_pieces_pass_the_judge(seed, grading_dir, capsys):
    """The hidden tests on teenygrad's own pieces (nothing installed but the grader's stand-ins): every part passes."""
    namespace, hidden = notebook_namespace(SOLUTIONS)
    assert run_hidden(PARTS, namespace, hidden, PARTS, grading_dir, seed) == {part: None for part in PARTS}


def test_training_reference_matches_teenygrads_autograd():
    ns, _ = notebook_namespace(SOLUTIONS)
    case = PARTS["index_add"].cases(np.random.default_rng(3))[-1]
    assert len(case) == TRAIN_ARGS
    losses = ns["train_embedding_model"](*case)  # teenygrad's own index_add
    np.testing.assert_allclose(losses, train_reference(*case), rtol=1e-9)
    assert losses[-1] < TRAIN_TARGET - 0.1 and losses[0] == pytest.approx(np.log(27), abs=0.1)


def test_draw_check_accepts_exactly_the_inverse_cdf():
    rng = np.random.default_rng(4)
    filtered = np.array([[0.0, -np.inf, 1.0, -np.inf]] * 200)
    u = rng.random(200)
    p = np.exp(filtered[0] - 1.0)
    c = np.cumsum(p / p.sum())
    right = np.where(u < c[0], 0, 2)
    assert _check_draws(filtered, u, right) is None
    assert _check_draws(filtered, u, 2 - right) is not None          # the other stretch
    assert _check_draws(filtered, u, np.where(right == 2, 3, 0)) is not None  # a filtered id


def test_judge_cases_cover_the_edge_cases():
    rng = np.random.default_rng(5)
    cases = PARTS["index_add"].cases(rng)
    values = [c for c in cases if len(c) == 4]
    assert any(c[1] > 0 for c in values) and any(np.ndim(c[2]) > 1 for c in values)  # another axis; a 2-D index
    assert any((np.asarray(c[2]) < 0).any() for c in values) and any(np.size(c[2]) == 0 for c in values)
    assert any(len(np.unique(c[2])) < np.size(c[2]) for c in values)  # repeated ids
    assert sum(len(c) == 3 for c in cases) == 1 and sum(len(c) == TRAIN_ARGS for c in cases) == 1
    top_k = PARTS["top_k_logits"].cases(rng)
    assert any(c[1] == 1 for c in top_k) and any(c[1] >= c[0].shape[1] for c in top_k) and any(c[1] < 1 for c in top_k)
    assert any(len(np.unique(c[0])) < c[0].size // 2 for c in top_k)  # ties
    top_p = PARTS["top_p_logits"].cases(rng)
    assert any(c[1] == 1.0 for c in top_p) and any(np.isneginf(c[0]).any() for c in top_p)
    assert sum(not 0 < c[1] <= 1 for c in top_p) == 2
    for logits, top_p_value, _ in top_p:  # no id's probability above sits on the threshold
        if 0 < top_p_value <= 1 and np.isfinite(logits).all() and len(logits) > 10:
            assert np.abs(_mass_above(np.asarray(logits)) - top_p_value).min() > 1e-4
    assert SAMPLE_TOL <= 1e-4
    vocab = PARTS["vocab"].cases(rng)
    assert {c[1] for c in vocab} >= {"default", "", ".", "\n"} and any(c[2] == "" for c in vocab)
    assert any("." in "".join(c[0]) and c[1] in (".", "default") for c in vocab)  # the boundary in the texts
    split = PARTS["split"].cases(rng)
    bad = [c for c in split if np.size(c[1]) and (abs(np.sum(c[1]) - 1) > 1e-9 or np.min(c[1]) < 0)]
    assert any(np.size(c[1]) == 0 for c in split) and len(bad) == 2 and any(np.min(c[1]) < 0 for c in bad)
    assert any(np.size(c[0]) == 0 for c in split) and any(0.0 in np.atleast_1d(c[1]) for c in split)
    assert any(np.asarray(c[0]).dtype.kind == "U" for c in split) and any(len(c[1]) == 4 for c in split)
    windows = PARTS["windows"].cases(rng)
    assert any(c[2] < 1 for c in windows) and any(np.size(c[1]) == 0 for c in windows)
    assert any("" in np.atleast_1d(c[1]).tolist() for c in windows) and any(c[2] > 5 for c in windows)
    bigram = PARTS["bigram"].cases(rng)
    assert {c[0] for c in bigram} == {"counts", "smoothed", "nll"}
    assert any(c[0] == "counts" and np.size(c[1]) == 0 for c in bigram) and any(c[0] == "counts" and c[4] for c in bigram)
    smoothing = [c for c in bigram if c[0] == "smoothed"]
    assert any(c[2] < 0 for c in smoothing) and any(c[2] == 0 and (c[1].sum(1) == 0).any() for c in smoothing)
    assert any(c[2] == 0 and not (c[1].sum(1) == 0).any() for c in smoothing) and any(c[3] == 64 for c in smoothing)
    nll = [c for c in bigram if c[0] == "nll"]
    assert any(np.size(c[2]) == 0 for c in nll) and any((c[1][c[2], c[3]] == 0).any() for c in nll if np.size(c[2]))
    draw = PARTS["draw"].cases(rng)
    assert sum(c[2] <= 0 for c in draw) == 2 and any(c[3] and c[4] for c in draw) and any(c[6] for c in draw)
    assert any((c[1] > 1 - 1e-6).all() and c[3] for c in draw) and any(np.abs(c[0]).max() > 500 for c in draw)
    assert any(np.shape(c[0])[1] == 1 for c in draw) and {c[5] for c in draw} == {32, 64}
    sample = PARTS["sample"].cases(rng)
    assert any(c[0][0] != "." for c in sample) and any(c[4] > 1 for c in sample) and any(c[5] != 1 for c in sample)
    steps = [sample_reference(*c)[1] for c in sample if c[0][0] == "."]
    assert any(s == c[7] for s, c in zip(steps, [c for c in sample if c[0][0] == "."]))  # a case that reaches max_len
    mlp = PARTS["mlp"].cases(rng)
    assert any(c[3] == 1 for c in mlp) and any(len(c[5]) == 1 for c in mlp) and {c[7] for c in mlp} == {0, 1}
    assert any(c[:4] == (27, 10, 200, 3) for c in mlp)  # the chapter's model
    evaluate = PARTS["evaluate"].cases(rng)
    sized = [c for c in evaluate if len(c[1]) and c[4] != 0]
    assert any(c[4] == -1 for c in sized) and any(c[4] > len(c[1]) for c in sized)
    assert any(c[4] > 0 and len(c[1]) % c[4] for c in sized) and any(c[5] for c in sized)
    assert any(len(c[1]) == 0 for c in evaluate) and any(c[4] == 0 for c in evaluate)


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, _) in tests.items():
        assert points == POINTS[part]



@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, grading_dir, capsys):
    namespace, hidden = notebook_namespace(SOLUTIONS)
    with pieces_from(namespace, ASSIGNMENT):
        assert run_hidden(PARTS, namespace, hidden, PARTS, grading_dir, seed) == {part: None for part in PARTS}


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "repeated ids counted once": ("index_add", "np.add.at(out, (slice(None),) * axis + (ids,), grads)",
                                  "out[(slice(None),) * axis + (ids,)] += grads"),
    "always along axis 0": ("index_add", "np.add.at(out, (slice(None),) * axis + (ids,), grads)",
                            "np.add.at(out, ids, grads.reshape(len(ids), *shape[1:]))"),
    "the result in float64 whatever g's dtype": ("index_add", "return tg.tensor(out, dtype=g.dtype)",
                                                 "return tg.tensor(out, dtype=tg.float64)"),
    "top-k keeps k + 1": ("top_k_logits", "np.where(larger < k, z, -np.inf)", "np.where(larger <= k, z, -np.inf)"),
    "top-k breaks ties by position": ("top_k_logits", "larger = (z[:, None, :] > z[:, :, None]).sum(axis=2)",
                                      "larger = np.argsort(np.argsort(-z, axis=1, kind='stable'), axis=1)"),
    "top-k without the ValueError": ("top_k_logits", "raise ValueError(", "print("),
    "nucleus keeps the first id past top_p out": ("top_p_logits", "mass_above < top_p", "mass_above + p < top_p"),
    "nucleus on the logits, not probabilities": ("top_p_logits", "(above * p[:, None, :]).sum(axis=2)",
                                                 "(above * np.exp(z)[:, None, :]).sum(axis=2)"),
    "nucleus cuts inside a tie": ("top_p_logits", "above = z[:, None, :] > z[:, :, None]",
                                  "above = np.argsort(np.argsort(-z, axis=1, kind='stable'), axis=1)[:, :, None] > "
                                  "np.argsort(np.argsort(-z, axis=1, kind='stable'), axis=1)[:, None, :]"),
    "build lists a boundary found in the texts twice": ("vocab", "    found.discard(boundary)\n", ""),
    "build does not sort": ("vocab", "first + sorted(found)", "first + list(found)"),
    "build ignores boundary=None": ("vocab", "first = [] if boundary is None else [boundary]", "first = [boundary or '.']"),
    "build makes a Vocab whatever the class": ("vocab", "return cls(first + sorted(found))",
                                               "return text.Vocab(first + sorted(found))"),
    "encode returns a list": ("vocab", "    return ids\n", "    return ids.tolist()\n"),
    "encode raises ValueError": ("vocab", "raise KeyError(", "raise ValueError("),
    "split with numpy's global generator": ("split", "np.random.default_rng(seed).permutation(len(items))",
                                            "np.random.permutation(len(items))"),
    "split floors the ends": ("split", "end = round(len(items) * total)", "end = int(len(items) * total)"),
    "split accepts fractions that do not add up to 1": ("split", " or abs(sum(fractions) - 1.0) > 1e-9", ""),
    "split returns a list of lists": ("split", "return tuple(parts)", "return parts"),
    "windows without the end boundary": ("windows", "[vocab.stoi[ch] for ch in w] + [0]", "[vocab.stoi[ch] for ch in w]"),
    "windows pads with one boundary": ("windows", "ids = [0] * block_size + ", "ids = [0] + "),
    "windows in float64": ("windows", "X = np.array(contexts, dtype=np.int64)", "X = np.array(contexts, dtype=np.float64)"),
    "windows accepts block_size 0": ("windows", "if block_size < 1:", "if block_size < 0:"),
    "counts a repeated pair once": ("bigram", "np.add.at(table, (a, b), 1.0)", "table[a, b] += 1.0"),
    "counts transposed": ("bigram", "np.add.at(table, (a, b), 1.0)", "np.add.at(table, (b, a), 1.0)"),
    "smoothed in float64": ("bigram", "return tg.tensor(table / totals, dtype=tg.float32)", "return tg.tensor(table / totals)"),
    "smoothed adds alpha once to a row's total": ("bigram", "totals = table.sum(axis=1, keepdims=True)",
                                                  "totals = counts.numpy().sum(axis=1, keepdims=True) + alpha"),
    "smoothed accepts a negative alpha": ("bigram", "if not alpha >= 0:", "if False:"),
    "smoothed changes the counts": ("bigram", "table = counts.numpy().astype(np.float64) + alpha",
                                    "table = counts.numpy()\n    table += alpha"),
    "bigram NLL in bits": ("bigram", "logs = np.log(", "logs = np.log2("),
    "bigram NLL summed": ("bigram", "float(-logs.mean())", "float(-logs.sum())"),
    "bigram NLL of no pairs is 0": ("bigram", 'return float("nan")', "return 0.0"),
    "draw without the temperature": ("draw", ".astype(np.float64) / temperature)", ".astype(np.float64))"),
    "draw multiplies by the temperature": ("draw", ".astype(np.float64) / temperature)", ".astype(np.float64) * temperature)"),
    "draw applies top_p before top_k": (
        "draw", "    if top_k is not None:\n        z = text.top_k_logits(z, top_k)\n    if top_p is not None:\n"
        "        z = text.top_p_logits(z, top_p)\n",
        "    if top_p is not None:\n        z = text.top_p_logits(z, top_p)\n    if top_k is not None:\n"
        "        z = text.top_k_logits(z, top_k)\n"),
    "draw ignores top_k": ("draw", "        z = text.top_k_logits(z, top_k)\n", "        pass\n"),
    "draw without a stable softmax": ("draw", "np.exp(z - z.max(axis=1, keepdims=True))", "np.exp(z)"),
    "draw returns float ids": ("draw", ".reshape(len(u)), dtype=tg.int64)", ".reshape(len(u)), dtype=tg.float32)"),
    "draw accepts temperature 0": ("draw", "if not temperature > 0:", "if temperature < 0:"),
    "sample with numpy's global generator": ("sample", "gen.random(n)", "np.random.random(n)"),
    "sample does not end a word at its boundary": ("sample", "                ended[i] = True\n", "                pass\n"),
    "sample shifts the context the wrong way": ("sample", "np.column_stack([context[:, 1:], ids])",
                                                "np.column_stack([ids, context[:, :-1]])"),
    "sample ignores the temperature": ("sample", "gen.random(n), temperature)", "gen.random(n))"),
    "sample keeps drawing after every word ended": ("sample", "        if ended.all():\n            break\n", ""),
    "sample without the boundary check": ("sample", "if vocab.itos[0] != text.BOUNDARY:", "if False:"),
    "mlp makes out before hidden": ("mlp", "self.hidden, self.out = nn.Linear(width, hidden), nn.Linear(hidden, vocab_size)",
                                    "self.out = nn.Linear(hidden, vocab_size)\n    self.hidden = nn.Linear(width, hidden)"),
    "mlp initialises out first": (
        "mlp", "    nn.init.normal_(self.hidden.weight, 0.0, (5.0 / 3.0) / math.sqrt(width))  # Kaiming for tanh: gain 5/3\n",
        "    nn.init.normal_(self.out.weight, 0.0, 0.01)\n"
        "    nn.init.normal_(self.hidden.weight, 0.0, (5.0 / 3.0) / math.sqrt(width))\n"),
    "mlp with relu's gain": ("mlp", "(5.0 / 3.0) / math.sqrt(width)", "math.sqrt(2.0) / math.sqrt(width)"),
    "mlp keeps the hidden bias nn.Linear drew": ("mlp", "    nn.init.constant_(self.hidden.bias, 0.0)\n", ""),
    "mlp without tanh": ("mlp", "self.hidden(side_by_side).tanh()", "self.hidden(side_by_side)"),
    "mlp looks the embeddings up in numpy": ("mlp", "vectors = self.embedding(ids)",
                                             "vectors = tg.tensor(self.embedding.weight.numpy()[ids.numpy()])"),
    "mlp interleaves the vectors": ("mlp", "side_by_side = vectors.reshape(",
                                    "side_by_side = vectors.transpose(1, 2).reshape("),
    "evaluate averages the batch means": ("evaluate", "float(np.average(means, weights=[min(step, n - s) for s in starts]))",
                                          "float(np.mean(means))"),
    "evaluate drops a short last batch": ("evaluate", "starts = range(0, n, step)", "starts = range(0, n - n % step or n, step)"),
    "evaluate ignores batch_size": ("evaluate", "step = n if batch_size is None else int(batch_size)", "step = n"),
    "evaluate returns a numpy float32": ("evaluate", "return float(np.average(", "return np.float32(np.average("),
    "evaluate of no rows is nan": ("evaluate", '        raise ValueError("evaluate: no rows to evaluate")',
                                   '        return float("nan")'),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, grading_dir, capsys):
    part, old, new = WRONG[mistake]
    namespace, hidden = notebook_namespace(SOLUTIONS, replacing(part, old, new))
    with pieces_from(namespace, ASSIGNMENT, [part]):
        verdicts = run_hidden(PARTS, namespace, hidden, [part], grading_dir, seed=5)
    assert verdicts[part] is not None, mistake


# --- the chapter ------------------------------------------------------------------------------------------------
# The chapter's house rules (title, headings, outputs, exercise link): tests/test_notebooks.py. Below, its runs are
# recomputed step for step (the same teenygrad ops, float32, the same seeds), and the stated figures asserted.

GLUED = {"ch8_bigram_train_loss", "ch8_bigram_dev_loss", "ch8_bigram_test_loss", "ch8_net_train_loss",
         "ch8_counting_train_loss", "ch8_mlp_train_loss", "ch8_mlp_dev_loss", "ch8_mlp_test_loss",
         "ch8_real_names_cold", "ch8_real_names_hot", "ch8_vowels_beside_vowels", "ch8_boundary_apart",
         "ch8_train_pairs", "ch8_bigram_test_perplexity", "ch8_mlp_params", "ch8_train_examples"}


def test_every_figure_in_the_prose_is_glued_by_the_code():
    nb = nbformat.read(CHAPTER, as_version=4)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "".join(c.source for c in nb.cells if c.cell_type == "code")
    used = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)", prose))
    glued = set(re.findall(r'glue\("([a-z0-9_]+)"', code))
    assert used <= glued == GLUED
    assert {"ch8_bigram_test_loss", "ch8_mlp_dev_loss", "ch8_mlp_test_loss", "ch8_net_train_loss"} <= used


@pytest.fixture(scope="module")
def data():
    train, dev, test = text.split(NAMES)
    out = {"names": (train, dev, test)}
    for block in (1, 3):
        out[block] = [text.windows(part, VOCAB, block) for part in (train, dev, test)]
    Xtr, Ytr = out[1][0]
    out["N"] = np.zeros((27, 27))
    np.add.at(out["N"], (Xtr[:, 0], Ytr), 1)
    return out


def _smoothed_nll(N, X, Y, alpha):
    P = (N + alpha) / (N + alpha).sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        return -np.mean(np.log(P[X[:, 0], Y]))


def test_bigram_figures(data):
    (Xtr, Ytr), (Xdv, Ydv), (Xte, Yte) = data[1]
    N = data["N"]
    assert N.sum() == len(Ytr) == 183_777 and N[0, 0] == 0  # "the top-left cell is zero too"
    starts, ends = N[0], N[:, 0]
    assert {VOCAB.itos[i] for i in np.argsort(starts)[-3:]} == set("akm")  # "start with a, k or m"
    assert {VOCAB.itos[i] for i in np.argsort(ends)[-3:]} == set("nae")  # "end in n, a or e"
    q = VOCAB.stoi["q"]
    assert round(N[q, VOCAB.stoi["u"]] / N[q].sum(), 1) == 0.8  # "followed by u (three times in four)"
    assert round(N[0].sum() / N.sum() * 7, 1) == 1.0 and 0.0008 < N[q].sum() / N.sum() < 0.0015  # one in 7, 1000
    assert np.isinf(_smoothed_nll(N, Xdv, Ydv, 0)) and np.isfinite(_smoothed_nll(N, Xtr, Ytr, 0))
    dev = {a: _smoothed_nll(N, Xdv, Ydv, a) for a in [0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100]}
    best = min(dev.values())
    assert all(dev[a] - best < 0.001 for a in [0.01, 0.03, 0.1, 0.3, 1])  # "0.01 to 1 ... equally well"
    assert dev[3] < dev[10] < dev[30] < dev[100] and dev[10] - best > 0.005  # "beyond that the dev loss rises"
    train, dev1, test = (_smoothed_nll(N, X, Y, 1.0) for X, Y in data[1])
    assert test == pytest.approx(2.45, abs=0.01)  # the "about 2.45"; the chapter prints 2.4554
    assert np.exp(test) == pytest.approx(11.7, abs=0.05) and max(train, dev1, test) - min(train, dev1, test) < 0.01


def _count_form(N: np.ndarray, W: np.ndarray) -> tuple[float, np.ndarray]:
    """The bigram network's loss and gradient from the counts alone (float64): every pair (a, b) contributes
    -log softmax(W_a)_b, so L = -sum_ab N_ab log softmax(W_a)_b / n and dL/dW_a = (n_a softmax(W_a) - N_a) / n."""
    Z = W - W.max(axis=1, keepdims=True)
    logp = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))
    n = N.sum()
    return -(N * logp).sum() / n, (N.sum(axis=1, keepdims=True) * np.exp(logp) - N) / n


def test_bigram_network_reaches_the_counting_loss(data):
    """A shortened recomputation: the chapter's gradient descent and Adam runs on the count form of the same
    loss (27 x 27 instead of 183,777 rows). The chapter's own figures are read back from the book build."""
    N = data["N"]
    counting = _count_form(N, np.log(np.maximum(N, 1e-300)))[0]
    assert f"{counting:.4f}" == "2.4539"
    W = np.zeros((27, 27))
    for _ in range(60):  # plain gradient descent, lr 50
        W -= 50.0 * _count_form(N, W)[1]
    gd = _count_form(N, W)[0]
    assert (np.log(27) - gd) / (np.log(27) - counting) > 0.9 and gd - counting > 0.02  # "most of the way ... crawls"
    W, m, v = np.zeros((27, 27)), np.zeros((27, 27)), np.zeros((27, 27))
    for t in range(1, 101):  # Adam, lr 0.3
        g = _count_form(N, W)[1]
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        W -= 0.3 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    assert counting < _count_form(N, W)[0] < counting + 1e-3  # "no table of probabilities can do better"


def _mlp(data, emb_dim, hidden, steps):
    """The chapter's MLPLanguageModel and train_mlp, step for step."""
    from teenygrad import nn, optim

    class MLPLanguageModel(nn.Module):
        def __init__(self, emb_dim, hidden, block_size=3):
            self.embedding = nn.Embedding(27, emb_dim)
            self.hidden = nn.Linear(block_size * emb_dim, hidden)
            self.out = nn.Linear(hidden, 27)
            nn.init.kaiming_normal_(self.hidden.weight, "tanh")
            nn.init.zeros_(self.hidden.bias)
            nn.init.normal_(self.out.weight, std=0.01)
            nn.init.zeros_(self.out.bias)

        def forward(self, X):
            e = self.embedding(tg.tensor(X))
            return self.out(self.hidden(e.reshape(len(X), -1)).tanh())

    (Xtr, Ytr), _, _ = data[3]
    tg.manual_seed(0)
    model = MLPLanguageModel(emb_dim, hidden)
    opt = optim.Adam(model.parameters(), lr=0.01)
    g = np.random.default_rng(1)
    for step in range(steps):
        opt.lr = optim.lr_at(step, steps, 0.01)
        batch = g.integers(0, len(Xtr), size=256)
        loss = model(Xtr[batch]).cross_entropy(tg.tensor(Ytr[batch]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    with tg.no_grad():
        losses = [model(X).cross_entropy(tg.tensor(Y)).item() for X, Y in data[3]]
    return model, losses


def test_mlp_shortened(data):
    """The chapter's MLP with a third of the steps (the full 3,000 run is asserted from the book build)."""
    model, (train, dev, test) = _mlp(data, 10, 200, 1000)
    assert model.num_parameters() == 11_897  # "about 12,000 parameters"
    assert dev < 2.25 and abs(test - dev) < 0.03 and train < dev
    assert dev < _smoothed_nll(data["N"], *data[1][1], 1.0) - 0.15  # already far below the bigram model


def test_chapter_figures_from_the_build(book_build, data):
    """The full chapter as the book build ran it: its glued figures, read back from the executed notebook."""
    fig = book_figures("08-language-models")
    assert set(fig) == GLUED
    for name, (X, Y) in zip(["ch8_bigram_train_loss", "ch8_bigram_dev_loss", "ch8_bigram_test_loss"], data[1]):
        assert fig[name] == pytest.approx(_smoothed_nll(data["N"], X, Y, 1.0), abs=1e-4), name
    assert fig["ch8_bigram_test_loss"] == pytest.approx(2.45, abs=0.01)  # "about 2.45"
    assert fig["ch8_bigram_test_perplexity"] == pytest.approx(np.exp(fig["ch8_bigram_test_loss"]), rel=1e-9)
    assert round(fig["ch8_bigram_test_perplexity"]) == 12  # "as unsure as a uniform choice among that many"
    assert fig["ch8_train_pairs"] == len(data[1][0][1]) and fig["ch8_train_examples"] == len(data[3][0][1])
    assert fig["ch8_mlp_params"] == 11_897
    counting = _count_form(data["N"], np.log(np.maximum(data["N"], 1e-300)))[0]
    assert fig["ch8_counting_train_loss"] == pytest.approx(counting, abs=1e-4)
    assert counting - 1e-4 < fig["ch8_net_train_loss"] < counting + 1e-3  # the network reaches the counts
    train, dev, test = fig["ch8_mlp_train_loss"], fig["ch8_mlp_dev_loss"], fig["ch8_mlp_test_loss"]
    assert dev <= 2.15  # the "MLP dev loss at most 2.15"
    assert 0 < dev - train < 0.08 and abs(test - dev) < 0.03  # "only a little lower", "close to its dev loss"
    assert fig["ch8_real_names_cold"] >= 4 and fig["ch8_real_names_hot"] < fig["ch8_real_names_cold"]
    assert fig["ch8_vowels_beside_vowels"] == 5 and fig["ch8_boundary_apart"] == 1  # the embedding space
