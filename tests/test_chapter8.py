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


# --- the 08-language-models judge -----------------------------------------------------------------------------

from autograder.judges.language_models import PARTS, SAMPLE_TOL, TRAIN_ARGS, TRAIN_TARGET, cumulative, train_reference  # noqa: E402
from teenygrad.grading import GRADING_DIR_ENV  # noqa: E402

from conftest import book_figures, notebook_namespace, replacing, run_hidden, solution_cells  # noqa: E402

SOLUTIONS = REPO / "solutions" / "08-language-models.ipynb"
POINTS = {"bigram_counts": 1, "smoothed_nll": 1, "embedding_backward": 2, "sample_with_temperature": 2}


def test_judge_references_against_loops():
    rng = np.random.default_rng(0)
    for tokens, V in PARTS["bigram_counts"].cases(rng):
        want = np.zeros((V, V))
        for a, b in zip(tokens[:-1].tolist(), tokens[1:].tolist()):
            want[a, b] += 1
        np.testing.assert_array_equal(PARTS["bigram_counts"].reference(tokens, V), want)
    for counts, xs, ys, alpha in PARTS["smoothed_nll"].cases(rng):
        V = len(counts)
        want = -sum(np.log((counts[x, y] + alpha) / (counts[x].sum() + V * alpha)) for x, y in zip(xs, ys)) / len(xs)
        assert float(PARTS["smoothed_nll"].reference(counts, xs, ys, alpha)) == pytest.approx(want, rel=1e-12)
        assert np.isfinite(want)
    for case in PARTS["embedding_backward"].cases(rng)[:-1]:
        W, index, g = case
        want = np.zeros_like(W)
        for k, r in enumerate(index.tolist()):
            want[r] += g[k]
        assert PARTS["embedding_backward"].check(case, (want,)) is None
        assert PARTS["embedding_backward"].check(case, (want * 1.01,)) is not None


def test_training_reference_matches_teenygrads_autograd():
    namespace, _ = notebook_namespace(SOLUTIONS)
    case = PARTS["embedding_backward"].cases(np.random.default_rng(3))[-1]
    assert len(case) == TRAIN_ARGS
    want = train_reference(*case)
    assert want[0] == pytest.approx(np.log(27), abs=0.01) and want[-1] < TRAIN_TARGET - 0.1  # the loss falls
    np.testing.assert_allclose(namespace["train_embedding_model"](*case), want, rtol=1e-10)  # teenygrad's own rule


def test_sample_check_accepts_exactly_the_inverse_cdf():
    rng = np.random.default_rng(1)
    check = PARTS["sample_with_temperature"].check
    for logits, T, u in PARTS["sample_with_temperature"].cases(rng):
        c = cumulative(logits, T)
        right = np.array([next((k for k in range(c.shape[1]) if ui < ck[k]), c.shape[1] - 1)
                          for ui, ck in zip(u, c)])
        assert check((logits, T, u), (right,)) is None
        assert check((logits, T, u), (right.astype(np.float64),)) is None  # whole numbers in a float array
        if c.shape[1] > 1 and len(u) > 100:  # the argmax, or draws at another temperature, are caught
            assert check((logits, T, u), (np.argmax(logits, axis=1),)) is not None
            assert check((logits, T, u), (np.argmax(cumulative(logits, 1.0) > u[:, None], axis=1),)) is not None
        assert check((logits, T, u), (right[:-1],)) is not None
    assert SAMPLE_TOL <= 1e-6


def test_judge_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    bigram = PARTS["bigram_counts"].cases(rng)
    assert any(len(t) == 1 for t, _ in bigram) and any(V == 1 for _, V in bigram)
    assert any(V == 27 and len(t) > 1000 for t, V in bigram)
    nll = PARTS["smoothed_nll"].cases(rng)
    assert any(a == 0 for *_, a in nll) and any(len(x) == 1 for _, x, _, _ in nll)
    assert any((c[x, y] == 0).any() for c, x, y, a in nll if a > 0)  # unseen pairs, kept finite by smoothing
    emb = PARTS["embedding_backward"].cases(rng)
    assert len(emb[-1]) == TRAIN_ARGS and all(len(c) == 3 for c in emb[:-1])
    assert any(len(set(i.tolist())) < len(i) for _, i, _ in emb[:-1])  # repeated ids: the gradients add
    assert any(len(set(i.tolist())) < len(W) for W, i, _ in emb[:-1])  # rows never looked up
    samples = PARTS["sample_with_temperature"].cases(rng)
    assert any(np.abs(z).max() / T > 1e4 for z, T, _ in samples) and any(z.shape[1] == 1 for z, _, _ in samples)
    assert any(len(u) >= 3000 for _, _, u in samples)


@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = notebook_namespace(SOLUTIONS)
    assert run_hidden(PARTS, namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        for other in set(PARTS) - {part}:  # each part is graded on its own
            assert f"{other}(" not in solutions[part] and f"{other}(" not in hidden


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "counts transposed": ("bigram_counts", "return (first.T @ second)", "return (second.T @ first)"),
    "each id paired with itself": ("bigram_counts", "tokens[1:].reshape", "tokens[:-1].reshape"),
    "smoothing only the numerator": ("smoothed_nll", "log_p = (N / N.sum(axis=1, keepdim=True)).log()",
                                     "log_p = (N / (N - alpha).sum(axis=1, keepdim=True)).log()"),
    "log-likelihood, not its negative": ("smoothed_nll", "return -log_p", "return log_p"),
    "a sum, not a mean": ("smoothed_nll", ".mean().item()", ".sum().item()"),
    "repeated ids averaged, not added": ("embedding_backward", "return (one_hot.T @ g,)",
                                         "return ((one_hot / one_hot.sum(axis=0).maximum(1.0)).T @ g,)"),
    "embedding gradient scaled": ("embedding_backward", "return (one_hot.T @ g,)", "return (one_hot.T @ g * 0.5,)"),
    "no temperature": ("sample_with_temperature", "* (1.0 / temperature)", "* 1.0"),
    "temperature multiplied": ("sample_with_temperature", "* (1.0 / temperature)", "* temperature"),
    "softmax without the shift": ("sample_with_temperature", "(z - z.max(axis=1, keepdim=True)).exp()", "z.exp()"),
    "cumulative sums one off": ("sample_with_temperature", "c[:, :V - 1] <= u", "c[:, 1:] <= u"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, tmp_path, monkeypatch, capsys):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = notebook_namespace(SOLUTIONS, replacing(part, old, new))
    with np.errstate(all="ignore"):
        verdicts = run_hidden(PARTS, namespace, hidden, [part], tmp_path, seed=5)
    assert verdicts[part] is not None, mistake


def test_training_case_alone_catches_a_wrong_rule():
    """A rule right whenever no id repeats, but averaging repeated rows, changes the whole trajectory."""
    namespace, _ = notebook_namespace(SOLUTIONS)
    case = PARTS["embedding_backward"].cases(np.random.default_rng(0))[-1]

    def averaging(ctx, g):
        one_hot = (ctx.index.reshape(-1, 1) == tg.arange(ctx.shape[0])).to(g.dtype)
        return ((one_hot / one_hot.sum(axis=0).maximum(1.0)).T @ g,)

    got = namespace["train_embedding_model"](*case, index_select=averaging)
    assert PARTS["embedding_backward"].check(case, (got,)) is not None
    right = namespace["train_embedding_model"](*case, index_select=namespace["embedding_backward"])
    assert PARTS["embedding_backward"].check(case, (right,)) is None


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
