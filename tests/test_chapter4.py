"""Chapter 4's pieces: teenygrad.classification against oracles, the 04-classification judge against independent
oracles and the solutions notebook, and the figures the chapter's prose states."""
from __future__ import annotations

from collections import Counter
from decimal import Decimal, localcontext

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teenygrad as tg
from autograder.judges import judge, write_cases
from autograder.judges.classification import PARTS
from teenygrad import classification
from teenygrad.datasets import load_digits, load_sentiment
from teenygrad.grading import GRADING_DIR_ENV, report
from teenygrad.preprocessing import standardize, train_test_split
from tests.test_chapter1_pieces import REPO

from conftest import solution_cells

CHAPTER = REPO / "chapters" / "04-classification.ipynb"
SOLUTIONS = REPO / "solutions" / "04-classification.ipynb"
POINTS = {"stable_sigmoid": 1, "stable_softmax": 1, "binary_cross_entropy": 1, "cross_entropy_gradient": 2,
          "softmax_regression_step": 1, "accuracy": 1}


# --- tokenize and Vocabulary -------------------------------------------------------------------------------

def _oracle_tokens(text: str) -> list[str]:
    """Character by character: a word is a maximal run of a-z, 0-9 and the apostrophe, after lower-casing."""
    tokens, current = [], ""
    for ch in text.lower():
        if ch in "abcdefghijklmnopqrstuvwxyz0123456789'":
            current += ch
        else:
            if current:
                tokens.append(current)
            current = ""
    return tokens + ([current] if current else [])


@settings(deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcXYZ019' .,!?-\tÉé/")), max_size=60))
def test_tokenize_matches_a_character_loop(text):
    assert classification.tokenize(text) == _oracle_tokens(text)


WORDS = ["good", "bad", "not", "great", "the", "it", "was", "10", "didn't"]
sentences = st.lists(st.sampled_from(WORDS + ["UNSEEN", "Good!"]), max_size=8).map(" ".join)


@settings(deadline=None)
@given(st.lists(sentences, min_size=1, max_size=12), st.lists(sentences, max_size=6), st.integers(1, 4),
       st.booleans())
def test_vocabulary_against_brute_force(train, test, min_count, binary):
    vocab = classification.Vocabulary(min_count=min_count).fit(train)
    candidates = sorted({w for text in train for w in _oracle_tokens(text)})
    df = {w: sum(w in _oracle_tokens(text) for text in train) for w in candidates}
    assert vocab.words == [w for w in candidates if df[w] >= min_count]  # sorted, document frequency
    assert len(vocab) == len(vocab.words)
    X = vocab.transform(test, binary=binary)
    assert X.shape == (len(test), len(vocab)) and X.dtype == np.float32
    for i, text in enumerate(test):
        counts = Counter(_oracle_tokens(text))
        for j, w in enumerate(vocab.words):
            want = min(counts[w], 1) if binary else counts[w]
            assert X[i, j] == want, (text, w)
    np.testing.assert_array_equal(vocab.fit_transform(train, binary), vocab.transform(train, binary))


def test_vocabulary_is_learned_from_the_fitted_texts_only():
    vocab = classification.Vocabulary().fit(["great phone", "bad phone"])
    assert vocab.words == ["bad", "great", "phone"]
    np.testing.assert_array_equal(vocab.transform(["terrible, terrible phone", ""]), [[0, 0, 1], [0, 0, 0]])
    with pytest.raises(ValueError, match="min_count"):
        classification.Vocabulary(min_count=0)


# --- one_hot and accuracy ----------------------------------------------------------------------------------

@settings(deadline=None)
@given(st.integers(1, 12).flatmap(lambda k: st.tuples(st.just(k), hnp.arrays(np.int64, st.integers(0, 30),
                                                                              elements=st.integers(0, k - 1)))))
def test_one_hot_is_rows_of_the_identity(problem):
    k, y = problem
    Y = classification.one_hot(y, k)
    assert isinstance(Y, tg.Tensor) and Y.dtype == tg.float32 and Y.shape == (len(y), k)
    np.testing.assert_array_equal(Y.numpy(), np.eye(k)[y])
    np.testing.assert_array_equal(classification.one_hot(tg.tensor(y), k).numpy(), np.eye(k)[y])


def test_one_hot_rejects_bad_labels():
    with pytest.raises(ValueError, match="0..2"):
        classification.one_hot(np.array([0, 3]), 3)
    with pytest.raises(ValueError, match="1-D"):
        classification.one_hot(np.zeros((2, 2), dtype=np.int64), 3)


finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@settings(deadline=None)
@given(st.integers(1, 40), st.integers(1, 8), st.data())
def test_accuracy_against_numpy(n, k, data):
    logits = data.draw(hnp.arrays(np.float64, (n, k), elements=finite))
    y = data.draw(hnp.arrays(np.int64, n, elements=st.integers(0, k - 1)))
    want = np.mean(np.argmax(logits, axis=1) == y)  # first maximum on ties, like teenygrad's argmax
    assert classification.accuracy(logits, y) == pytest.approx(want, abs=1e-15)
    assert classification.accuracy(tg.tensor(logits), tg.tensor(y)) == pytest.approx(want, abs=1e-15)
    scores = logits[:, 0]
    labels = y % 2
    assert classification.accuracy(scores, labels) == pytest.approx(np.mean((scores > 0) == labels), abs=1e-15)


def test_accuracy_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="do not match"):
        classification.accuracy(np.zeros((3, 2)), np.zeros(4, dtype=np.int64))
    with pytest.raises(ValueError, match="no examples"):
        classification.accuracy(np.zeros((0, 2)), np.zeros(0, dtype=np.int64))


# --- the judge's references against independent oracles ---------------------------------------------------

def _exact_sigmoid(z: float) -> float:
    with localcontext() as ctx:
        ctx.prec = 60
        return float(1 / (1 + (-Decimal(z)).exp()))


def _exact_log1pexp(z: float) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return (1 + Decimal(z).exp()).ln()


def test_judge_references_against_exact_arithmetic():
    rng = np.random.default_rng(0)
    for (z,) in PARTS["stable_sigmoid"].cases(rng):
        want = np.vectorize(_exact_sigmoid)(z)
        np.testing.assert_allclose(PARTS["stable_sigmoid"].reference(z), want, rtol=1e-14, atol=1e-300)
    for (Z,) in PARTS["stable_softmax"].cases(rng):
        with localcontext() as ctx:
            ctx.prec = 60
            E = [[Decimal(v).exp() for v in row] for row in Z.tolist()]
            want = np.array([[float(e / sum(row)) for e in row] for row in E])
        np.testing.assert_allclose(PARTS["stable_softmax"].reference(Z), want, rtol=1e-13, atol=1e-300)
    for z, y in PARTS["binary_cross_entropy"].cases(rng):
        with localcontext() as ctx:
            ctx.prec = 60
            want = float(sum(_exact_log1pexp(a) - Decimal(b) * Decimal(a) for a, b in zip(z.tolist(), y.tolist()))
                         / len(z))
        assert float(PARTS["binary_cross_entropy"].reference(z, y)) == pytest.approx(want, rel=1e-12, abs=1e-12)


def _mean_cross_entropy(X, Y, W):
    Z = X @ W
    m = Z.max(axis=1, keepdims=True)
    return -np.mean(np.sum(Y * (Z - m - np.log(np.exp(Z - m).sum(axis=1, keepdims=True))), axis=1))


def test_gradient_reference_against_finite_differences():
    rng = np.random.default_rng(1)
    for X, Y, W in PARTS["cross_entropy_gradient"].cases(rng):
        if np.abs(X @ W).max() > 50:  # saturated softmax: finite differences see a piecewise-linear loss
            continue
        h, numeric = 1e-6, np.zeros_like(W)
        for index in np.ndindex(W.shape):
            E = np.zeros_like(W)
            E[index] = h
            numeric[index] = (_mean_cross_entropy(X, Y, W + E) - _mean_cross_entropy(X, Y, W - E)) / (2 * h)
        np.testing.assert_allclose(PARTS["cross_entropy_gradient"].reference(X, Y, W), numeric, rtol=1e-6, atol=1e-8)
    for X, y, W, lr in PARTS["softmax_regression_step"].cases(rng):
        Y = np.zeros((len(y), W.shape[1]))
        Y[np.arange(len(y)), y] = 1
        want = W - lr * PARTS["cross_entropy_gradient"].reference(X, Y, W)
        np.testing.assert_allclose(PARTS["softmax_regression_step"].reference(X, y, W, lr), want, rtol=1e-12)
    for logits, y in PARTS["accuracy"].cases(rng):
        hits = sum(max(range(logits.shape[1]), key=lambda k: row[k]) == label for row, label in zip(logits.tolist(), y))
        assert float(PARTS["accuracy"].reference(logits, y)) == hits / len(y)


def test_judge_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    assert any(np.abs(z).max() >= 1000 for (z,) in PARTS["stable_sigmoid"].cases(rng))
    softmax_shapes = [Z.shape for (Z,) in PARTS["stable_softmax"].cases(rng)]
    assert (1, 1) in softmax_shapes and any(n == 1 for n, _ in softmax_shapes)
    assert any(np.abs(Z).max() >= 1000 for (Z,) in PARTS["stable_softmax"].cases(rng))
    assert any(np.abs(z).max() >= 1000 for z, _ in PARTS["binary_cross_entropy"].cases(rng))
    assert any(len(z) == 1 for z, _ in PARTS["binary_cross_entropy"].cases(rng))
    for part in ("cross_entropy_gradient", "softmax_regression_step"):
        cases = PARTS[part].cases(rng)
        assert any(c[0].shape[0] == 1 for c in cases) and any(c[0].shape[1] == 1 for c in cases)
        assert any(c[2].shape[1] == 1 for c in cases)  # one class
        assert any(np.abs(c[0] @ c[2]).max() > 500 for c in cases)  # huge logits
    assert any(c[0].shape == (1, 1) for c in PARTS["accuracy"].cases(rng))


# --- the 04-classification judge against the solutions notebook -------------------------------------------

def _solution_namespace() -> dict:
    nb = nbformat.read(SOLUTIONS, as_version=4)
    namespace: dict = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade_id") == "setup"):
            exec(compile(cell.source, f"<solution cell {meta['grade_id']}>", "exec"), namespace)
    return namespace


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", {part})' in hidden and "assert" not in hidden


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch):
    namespace = _solution_namespace()
    drawn = write_cases(PARTS, tmp_path, seed)
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    for part in PARTS:
        report(part, namespace[part])
    assert judge(PARTS, drawn, tmp_path) == {part: None for part in PARTS}


def _softmax_unstable(Z):
    E = np.exp(Z)
    return E / E.sum(axis=1, keepdims=True)


def _softmax_stable(Z):
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


WRONG = {  # plausible mistakes the judge must catch
    "stable_sigmoid": [
        lambda z: np.exp(z) / (1 + np.exp(z)),  # nan for z = 1000
        lambda z: np.where(z >= 0, 1 / (1 + np.exp(-np.abs(z))), 1 - 1 / (1 + np.exp(-np.abs(z)))),  # 1 - sigma rounds
        lambda z: (1 / (1 + np.exp(-z.astype(np.float32)))).astype(np.float64),  # float32: small values flush to 0
    ],
    "stable_softmax": [
        _softmax_unstable,
        lambda Z: np.exp(Z - Z.max()) / np.exp(Z - Z.max()).sum(axis=1, keepdims=True),  # one max for all rows
        lambda Z: np.exp(Z - Z.max(axis=1, keepdims=True)) / np.exp(Z - Z.max(axis=1, keepdims=True)).sum(),
    ],
    "binary_cross_entropy": [
        lambda z, y: -np.mean(y * np.log(1 / (1 + np.exp(-z))) + (1 - y) * np.log(1 - 1 / (1 + np.exp(-z)))),
        lambda z, y: np.sum(np.logaddexp(0, z) - y * z),  # no 1/n
        lambda z, y: np.mean(np.log1p(np.exp(z)) - y * z),  # overflows at z = 1000
    ],
    "cross_entropy_gradient": [
        lambda X, Y, W: X.T @ (_softmax_stable(X @ W) - Y),  # missing 1/n
        lambda X, Y, W: X.T @ (Y - _softmax_stable(X @ W)) / len(X),  # wrong sign
        lambda X, Y, W: X.T @ (_softmax_unstable(X @ W) - Y) / len(X),  # unstable on huge logits
    ],
    "softmax_regression_step": [
        lambda X, y, W, lr: W + lr * X.T @ (_softmax_stable(X @ W) - np.eye(W.shape[1])[y]) / len(y),  # uphill
        lambda X, y, W, lr: W - lr * X.T @ (_softmax_stable(X @ W) - np.eye(W.shape[1])[y]),  # missing 1/n
        lambda X, y, W, lr: W - lr * X.T @ (_softmax_unstable(X @ W) - np.eye(W.shape[1])[y]) / len(y),
    ],
    "accuracy": [
        lambda Z, y: np.mean(np.argmin(Z, axis=1) == y),
        lambda Z, y: np.sum(np.argmax(Z, axis=1) == y),  # a count, not a fraction
        lambda Z, y: np.mean(np.argmax(Z, axis=0)[: len(y)] == y),  # the wrong axis
    ],
}


@pytest.mark.parametrize("variant", [0, 1, 2])
def test_judge_rejects_wrong_answers(variant, tmp_path, monkeypatch):
    drawn = write_cases(PARTS, tmp_path, seed=7)
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    with np.errstate(all="ignore"):
        for part, fns in WRONG.items():
            report(part, fns[variant])
    verdicts = judge(PARTS, drawn, tmp_path)
    assert all(verdicts[part] for part in PARTS), verdicts


# --- the chapter -------------------------------------------------------------------------------------------

def test_chapter_derives_gradients_by_hand_and_glues_its_figures():
    """Chapter 4's own rules; the house rules (title, headings, outputs, exercise link): tests/test_notebooks.py."""
    nb = nbformat.read(CHAPTER, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert ".backward(" not in cell.source and "requires_grad" not in cell.source, "gradients by hand only"
    source = "".join(c.source for c in nb.cells)
    for name in ["ch4_sentiment_test_acc", "ch4_digits_test_acc", "ch4_digits_test_errors"]:
        assert f"glue(\"{name}\"" in source and f"{{glue:text}}`{name}" in source


def _sentiment_features():
    texts, labels, _ = load_sentiment()
    ids_train, ids_test, y_train, y_test = train_test_split(np.arange(len(texts)), labels, test_fraction=0.2, seed=0)
    vocab = classification.Vocabulary(min_count=2).fit([texts[i] for i in ids_train])
    bias = lambda X: np.hstack([np.ones((len(X), 1), dtype=X.dtype), X])
    X_train = bias(vocab.transform([texts[i] for i in ids_train]))
    X_test = bias(vocab.transform([texts[i] for i in ids_test]))
    return texts, vocab, ids_test, X_train, X_test, y_train, y_test


def _digits_features():
    X, y = load_digits()
    D_train, D_test, d_train, d_test = train_test_split(X, y, test_fraction=0.2, seed=0)
    Z_train, Z_test, _, _ = standardize(D_train, D_test)
    bias = lambda X: np.hstack([np.ones((len(X), 1)), X])
    return bias(Z_train), bias(Z_test), d_train, d_test


def _sentiment_teenygrad():
    """The chapter's sentiment run, step for step: float32 tensors, lr 2, 500 steps from zeros."""
    texts, vocab, ids_test, X_train, X_test, y_train, y_test = _sentiment_features()
    X, Xt = tg.tensor(X_train), tg.tensor(X_test)
    y = tg.tensor(y_train, dtype=tg.float32)
    w = tg.zeros(X.shape[1])
    for _ in range(500):
        z = (X * w).sum(axis=1)
        w = w - 2.0 * (X * (z.sigmoid() - y).reshape(len(y), 1)).sum(axis=0) / len(y)
    return dict(texts=texts, vocab=vocab, ids_test=ids_test, w=w.numpy(), X_test=X_test, y_test=y_test,
                train_acc=classification.accuracy((X * w).sum(axis=1), y_train),
                test_acc=classification.accuracy((Xt * w).sum(axis=1), y_test))


def _digits_teenygrad():
    """The chapter's digits run: float32 tensors, lr 0.5, 300 steps from zeros."""
    Z_train, Z_test, d_train, d_test = _digits_features()
    X, Xt = tg.tensor(Z_train.astype(np.float32)), tg.tensor(Z_test.astype(np.float32))
    Y = classification.one_hot(d_train, 10)
    W = tg.zeros(X.shape[1], 10)
    accs = []
    for _ in range(300):
        Z = X @ W
        accs.append(classification.accuracy(Z, d_train))
        W = W - 0.5 * X.T @ (Z.softmax(axis=1) - Y) / len(Y)
    return dict(W=W, train_acc=classification.accuracy(X @ W, d_train), test_acc=classification.accuracy(Xt @ W, d_test),
                pred=(Xt @ W).argmax(axis=1).numpy(), d_test=d_test, accs=accs)


@pytest.fixture(scope="module")
def sentiment():
    return _sentiment_teenygrad()


@pytest.fixture(scope="module")
def digits():
    return _digits_teenygrad()


def test_sentiment_figures(sentiment):
    # the vocabulary: "4649 different words ... 1918 occur in at least 2" ("fewer than half survive")
    texts, labels, _ = load_sentiment()
    assert len(sentiment["vocab"]) == 1918 and sentiment["X_test"].shape == (600, 1919)
    # glued ch4_sentiment_train_acc / ch4_sentiment_test_acc: "about four in five sentences it has never seen"
    assert sentiment["test_acc"] >= 0.78
    assert sentiment["test_acc"] == pytest.approx(0.805, abs=0.004) and sentiment["train_acc"] == pytest.approx(0.940, abs=0.004)
    # the words named in the prose, by weight
    weights, words = sentiment["w"][1:], sentiment["vocab"].words
    order = np.argsort(weights)
    top = {words[j] for j in order[-12:]}
    bottom = {words[j] for j in order[:12]}
    assert {"great", "love", "excellent", "delicious", "10"} <= top
    assert {"bad", "poor", "worst", "waste", "not", "don't", "wasn't", "then"} <= bottom
    # the mistakes quoted in the prose are test sentences the model gets wrong
    X_test, y_test, w = sentiment["X_test"], sentiment["y_test"], sentiment["w"]
    wrong = {texts[sentiment["ids_test"][i]] for i in np.flatnonzero((X_test @ w > 0) != (y_test == 1))}
    for quote in ["did not disappoint", "No shifting, no bubbling, no peeling", "expect a great deal more",
                  "The good", "It was just not a fun experience."]:
        assert any(quote in text for text in wrong), quote
    assert labels[texts.index("It was just not a fun experience.")] == 1  # "marked positive in the data set"


def test_sentiment_figures_independently_in_float64():
    """numpy float64 on the sparse 0/1 matrix instead of teenygrad float32: the same run to a sentence or two."""
    _, _, _, X_train, X_test, y_train, y_test = _sentiment_features()
    X, Xt = X_train.astype(np.float64), X_test.astype(np.float64)
    assert abs(X[:, 1:].sum(axis=1).mean() - 10) < 0.5  # "about ten known words per sentence"
    texts, _, _ = load_sentiment()
    ids_train = train_test_split(np.arange(len(texts)), np.zeros(len(texts)), test_fraction=0.2, seed=0)[0]
    distinct = {word for i in ids_train for word in classification.tokenize(texts[i])}
    assert len(distinct) == 4649 and X.shape[1] - 1 < len(distinct) / 2  # "fewer than half ... survive"
    rows, cols = np.nonzero(X)  # X is 0/1: X @ w sums the weights of each row's words, X.T @ r the other way round
    n, d = X.shape
    w = np.zeros(d)
    for _ in range(500):
        z = np.bincount(rows, weights=w[cols], minlength=n)
        w -= 2.0 * np.bincount(cols, weights=(1 / (1 + np.exp(-z)) - y_train)[rows], minlength=d) / n
    assert abs(np.mean((Xt @ w > 0) == y_test) - 0.805) <= 2.5 / 600
    # the curvature bound: "about 0.5, so learning rates up to about 4"
    top = np.linalg.eigvalsh(X.T @ X / (4 * len(X)))[-1]
    assert top == pytest.approx(0.497, abs=0.002) and 3.9 < 2 / top < 4.1


def test_digits_figures(digits):
    # glued ch4_digits_train_acc / ch4_digits_test_acc / ch4_digits_test_errors
    assert digits["test_acc"] >= 0.95
    assert digits["test_acc"] == pytest.approx(350 / 360, abs=1e-12) and digits["train_acc"] == pytest.approx(0.991, abs=0.002)
    pred, truth = digits["pred"], digits["d_test"]
    assert np.sum(pred != truth) == 10  # "only 10 of 360 test digits are wrong"
    assert digits["accs"][10] > 0.9  # "after only ten steps ... more than nine digits in ten"
    wrong = pred != truth
    assert np.sum(wrong & ((pred == 1) | (truth == 1))) > 5  # "most of the mistakes involve a 1"
    mistaken = np.bincount(truth[wrong], minlength=10)
    assert mistaken[8] == 3 and mistaken.max() == 3 and np.sum(mistaken == 3) == 1  # "the 8 ... (three times)"


def test_digits_figures_independently_in_float64():
    Z_train, Z_test, d_train, d_test = _digits_features()
    W, Y = np.zeros((Z_train.shape[1], 10)), np.eye(10)[d_train]
    for _ in range(300):
        Z = Z_train @ W
        P = np.exp(Z - Z.max(axis=1, keepdims=True))
        W -= 0.5 * Z_train.T @ (P / P.sum(axis=1, keepdims=True) - Y) / len(Y)
    assert abs(np.mean(np.argmax(Z_test @ W, axis=1) == d_test) - 350 / 360) <= 1.5 / 360
