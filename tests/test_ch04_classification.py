"""Chapter 4's pieces: teenygrad.classification against oracles (the chapter's tokenize, vocabulary, one_hot and
accuracy, and exercise 4's measures beyond accuracy), the 04-classification judge against independent oracles and
the solutions notebook, plausible wrong answers rejected, and the figures the chapter's prose states."""
from __future__ import annotations

from collections import Counter

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teenygrad as tg
from autograder.judges.classification import PARTS
from teenygrad import classification
from teenygrad.datasets import load_digits, load_sentiment
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.preprocessing import standardize, train_test_split
from tests.test_ch01_regression import REPO

from conftest import book_figures, notebook_namespace, replacing, run_hidden, solution_cells

CHAPTER = REPO / "chapters" / "04-classification.ipynb"
SOLUTIONS = REPO / "solutions" / "04-classification.ipynb"
ASSIGNMENT = "04-classification"
POINTS = {"precision_recall_f1": 3, "top_k_accuracy": 2, "roc_auc": 2}


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


# --- the measures beyond accuracy (exercise 4's pieces, the book's answers) ---------------------------------

def _prf_oracle(t, p, K):
    """Counting example by example, from the definitions."""
    tp, fp, fn = np.zeros(K), np.zeros(K), np.zeros(K)
    for a, b in zip(t.tolist(), p.tolist()):
        if a == b:
            tp[a] += 1
        else:
            fp[b] += 1
            fn[a] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        P, R = np.nan_to_num(tp / (tp + fp)), np.nan_to_num(tp / (tp + fn))
        F = np.nan_to_num(2 * P * R / (P + R))
    return P, R, F


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 8).flatmap(lambda k: st.tuples(st.just(k), st.lists(st.tuples(st.integers(0, k - 1),
                                                                                     st.integers(0, k - 1)),
                                                                           min_size=1, max_size=40))))
def test_precision_recall_f1_against_counting(problem):
    K, pairs = problem
    t, p = np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])
    for got, want in zip(classification.precision_recall_f1(t, p, K), _prf_oracle(t, p, K)):
        assert got.shape == (K,) and got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(PARTS["precision_recall_f1"].reference(t, p, K), _prf_oracle(t, p, K), rtol=1e-12)


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 20), st.integers(1, 6), st.integers(1, 8), st.integers(0, 2**31))
def test_top_k_accuracy_against_a_stable_sort(n, K, k, seed):
    rng = np.random.default_rng(seed)
    Z, y = rng.integers(0, 3, size=(n, K)).astype(np.float64), rng.integers(0, K, size=n)
    order = np.argsort(-Z, axis=1, kind="stable")  # descending, equal scores in index order: argmax's tie rule
    want = np.mean([y[i] in order[i, :k] for i in range(n)])
    assert classification.top_k_accuracy(Z, y, k) == pytest.approx(want, abs=1e-15)
    assert PARTS["top_k_accuracy"].reference(Z, y, k) == pytest.approx(want, abs=1e-15)
    if k == 1:
        assert classification.top_k_accuracy(Z, y, 1) == pytest.approx(classification.accuracy(Z, y))


@settings(deadline=None, max_examples=60)
@given(st.integers(2, 40), st.integers(0, 2**31), st.booleans())
def test_roc_auc_against_the_rank_formula(n, seed, ties):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    y[0], y[1] = 0, 1
    s = rng.integers(0, 4, size=n).astype(np.float64) if ties else rng.normal(size=n)
    ranks = np.empty(n)  # Mann-Whitney: the AUC from the mean ranks (ties get their average rank)
    order = np.argsort(s, kind="stable")
    sorted_s = s[order]
    for v in np.unique(s):
        where = np.flatnonzero(sorted_s == v)
        ranks[order[where]] = where.mean() + 1
    P, N = int(y.sum()), int(n - y.sum())
    want = (ranks[y == 1].sum() - P * (P + 1) / 2) / (P * N)
    assert classification.roc_auc(s, y) == pytest.approx(want, abs=1e-12)
    assert PARTS["roc_auc"].reference(s, y) == pytest.approx(want, abs=1e-12)


def test_measures_reject_bad_input():
    with pytest.raises(ValueError, match="0..2"):
        classification.precision_recall_f1(np.array([0, 3]), np.array([0, 1]), 3)
    with pytest.raises(ValueError, match="2 true labels but 1"):
        classification.precision_recall_f1(np.array([0, 1]), np.array([0]), 3)
    with pytest.raises(ValueError, match="positive integer"):
        classification.top_k_accuracy(np.zeros((2, 3)), np.array([0, 1]), 0)
    with pytest.raises(ValueError, match="one positive and one negative"):
        classification.roc_auc(np.array([0.1, 0.2]), np.array([1, 1]))


def test_judge_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    prf = PARTS["precision_recall_f1"].cases(rng)
    assert any(len(t) == 1 for t, _, _ in prf) and any(K == 1 for _, _, K in prf)
    assert any(set(range(K)) - set(t.tolist()) - set(p.tolist()) for t, p, K in prf)  # a class never seen at all
    assert any(set(range(K)) - set(p.tolist()) and set(range(K)) & set(t.tolist()) - set(p.tolist())
               for t, p, K in prf)  # present but never predicted
    topk = PARTS["top_k_accuracy"].cases(rng)
    assert any(k > Z.shape[1] for Z, _, k in topk) and any(np.abs(Z).max() > 1e299 for Z, _, _ in topk)
    assert any((np.sort(Z, axis=1)[:, 1:] == np.sort(Z, axis=1)[:, :-1]).any() for Z, _, _ in topk)  # ties
    auc = PARTS["roc_auc"].cases(rng)
    assert any(len(set(y.tolist())) == 1 for _, y in auc) and any(len(np.unique(s)) < len(s) for s, _ in auc)


# --- the 04-classification judge against the solutions notebook -------------------------------------------


def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    namespace, hidden = notebook_namespace(SOLUTIONS, transform)
    for part, pieces in tg.edition.parts(ASSIGNMENT).items():
        tg.edition.install(ASSIGNMENT, part, *(namespace[p.name] for p in pieces))
    return namespace, hidden


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS) == set(tg.edition.parts(ASSIGNMENT))
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        assert f"classification.{part}(" in hidden  # graded through the package, with the learner's piece in it


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert run_hidden(PARTS, namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "precision and recall swapped": ("precision_recall_f1", "return precision.numpy(), recall.numpy(), f1.numpy()",
                                     "return recall.numpy(), precision.numpy(), f1.numpy()"),
    "0/0 left as nan": ("precision_recall_f1", "precision = hits / predicted.maximum(1.0)",
                        "precision = hits / predicted"),
    "F1 as the arithmetic mean": ("precision_recall_f1", "f1 = 2 * hits / (present + predicted).maximum(1.0)",
                                  "f1 = (precision + recall) / 2"),
    "top-k ties go to the higher class": ("top_k_accuracy", "(classes < target)", "(classes > target)"),
    "top-k counts ties as ahead": ("top_k_accuracy", "((Z == own) * (classes < target))", "(Z == own)"),
    "top-k with <= k": ("top_k_accuracy", "(ahead < k)", "(ahead <= k)"),
    "AUC counts ties as wins": ("roc_auc", "0.5 * (sp == sn).double()", "(sp == sn).double()"),
    "AUC without the ValueError": ("roc_auc", "        raise ValueError(", "        return 0.5\n        raise ValueError("),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, tmp_path, monkeypatch):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(replacing(part, old, new))
    verdicts = run_hidden(PARTS, namespace, hidden, [part], tmp_path, seed=5)
    assert verdicts[part] is not None, mistake


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


def test_chapter_sentiment_sizes_from_the_build(book_build):
    """The sentiment model's size and step bound that chapter 4 states, against an independent recomputation."""
    fig = book_figures("04-classification")
    _, _, _, X_train, _, y_train, _ = _sentiment_features()
    assert (fig["ch4_sentiment_weights"], fig["ch4_sentiment_train_size"]) == (X_train.shape[1], len(y_train))
    curvature = np.linalg.eigvalsh(X_train.T @ X_train / (4 * len(y_train)))[-1]  # power iteration's target
    assert fig["ch4_sentiment_curvature"] == pytest.approx(curvature, rel=1e-3)
    assert fig["ch4_sentiment_safe_lr"] == pytest.approx(2 / fig["ch4_sentiment_curvature"], rel=1e-9)
