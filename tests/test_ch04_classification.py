"""Chapter 4's pieces: teenygrad.classification against oracles (the chapter's tokenize, vocabulary, one_hot and
accuracy, the measures beyond accuracy, and exercise 4's softmax and cross-entropy kernels and training loop), the
04-classification judge against independent oracles and the solutions notebook, plausible wrong answers rejected,
and the figures the chapter's prose states."""
from __future__ import annotations

import contextlib
from collections import Counter

import nbformat
import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teenygrad as tg
from autograder.judges.classification import PARTS, _check_fit, _fit_reference
from teenygrad import classification
from teenygrad.datasets import load_digits, load_sentiment
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.kernels.jit import JIT_ENABLED
from teenygrad.preprocessing import standardize, train_test_split
from tests.test_ch01_regression import REPO

from conftest import book_figures, notebook_namespace, replacing, run_hidden, solution_cells

CHAPTER = REPO / "chapters" / "04-classification.ipynb"
SOLUTIONS = REPO / "solutions" / "04-classification.ipynb"
ASSIGNMENT = "04-classification"
POINTS = {"softmax": 2, "cross_entropy": 2, "fit_classifier": 2, "precision_recall_f1": 1}


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
    soft = PARTS["softmax"].cases(rng)
    views = [_view(*case[:4]) for case in soft]
    assert any(v.shape[0] == 1 for v in views) and any(v.shape[1] == 1 for v in views)
    assert any(np.isneginf(v).any() for v in views) and any(np.ptp(v[np.isfinite(v)]) > 1e299 for v in views)
    assert any(s[0] < 0 or s[1] < 0 for _, _, s, _, _ in soft) and any(s[1] > 1 for _, _, s, _, _ in soft)
    ce = PARTS["cross_entropy"].cases(rng)
    assert any(np.isneginf(x).any() for x, _, _ in ce) and any(x.ndim > 2 for x, _, _ in ce)
    assert any(t.max() >= x.shape[-1] for x, t, _ in ce) and any(t.min() < 0 for x, t, _ in ce)
    fits = PARTS["fit_classifier"].cases(rng)
    runs = [_fit_reference(*case) for case in fits]
    assert any(len(val) < case[7] and best == 1 for case, (_, _, val, best) in zip(fits, runs))  # stopped early at 1
    assert any(1 < best < len(val) < case[7] for case, (_, _, val, best) in zip(fits, runs))  # stopped mid-run
    assert any(len(case[2]) % case[6] for case in fits) and any(case[6] == 1 for case in fits)
    assert any(case[6] >= len(case[2]) for case in fits)


def _view(base, shape, strides, offset):
    return np.lib.stride_tricks.as_strided(base[int(offset):], tuple(shape), tuple(int(s) * 8 for s in strides))


def test_judge_references_against_finite_differences():
    """The judge's float64 references: their gradients against central differences of their forwards."""
    rng = np.random.default_rng(3)
    for base, shape, strides, offset, g in PARTS["softmax"].cases(rng)[:6]:
        x = _view(base, shape, strides, offset).copy()
        if not np.isfinite(x).all() or np.abs(x).max() > 1e3:
            continue
        ref = PARTS["softmax"].reference(base, shape, strides, offset, g)
        for k, column in ((4, 0), (5, 1)):
            numeric = np.zeros_like(x)
            for i, j in np.ndindex(*x.shape):
                e = np.zeros_like(x)
                e[i, j] = 1e-6
                f = lambda z: PARTS["softmax"].reference(z.reshape(-1), shape, np.array([shape[1], 1]), 0, g)[column]
                numeric[i, j] = ((g * f(x + e)).sum() - (g * f(x - e)).sum()) / 2e-6
            np.testing.assert_allclose(ref[k], numeric, atol=1e-6)
    for x, t, c in PARTS["cross_entropy"].cases(rng)[:8]:
        if not np.isfinite(x).all() or np.abs(x).max() > 1e3:
            continue
        loss, grad = PARTS["cross_entropy"].reference(x, t, c)
        brute = np.mean([-np.log(np.exp(row[k]) / np.exp(row).sum()) for row, k in
                         zip(x.reshape(-1, x.shape[-1]), t.reshape(-1))])
        assert loss == pytest.approx(brute, rel=1e-10)
        for index in list(np.ndindex(*x.shape))[:6]:
            e = np.zeros_like(x)
            e[index] = 1e-6
            numeric = c * (PARTS["cross_entropy"].reference(x + e, t, c)[0]
                           - PARTS["cross_entropy"].reference(x - e, t, c)[0]) / 2e-6
            assert grad[index] == pytest.approx(numeric, abs=1e-7)


@pytest.mark.parametrize("path", ["serial", "parallel"])
def test_the_books_kernels_pass_the_judges_cases(path):
    """teenygrad's softmax and cross-entropy on the judge's cases, both kernel paths, against its references."""
    from autograder.judges import compare
    rng = np.random.default_rng(4)
    with tg.kernels.force_path(path):
        for base, shape, strides, offset, g in PARTS["softmax"].cases(rng):
            t = tg.Tensor._make(tg.tensor(base)._buf, tuple(map(int, shape)), tuple(map(int, strides)), int(offset))
            got = [t.softmax(-1).numpy(), t.log_softmax(-1).numpy(), t.softmax(0).numpy(), t.log_softmax(0).numpy()]
            for op in ("softmax", "log_softmax"):
                x = tg.tensor(t.numpy(), requires_grad=True)
                getattr(x, op)(axis=-1).backward(tg.tensor(g))
                got.append(x.grad.numpy())
            assert compare(tuple(got), PARTS["softmax"].reference(base, shape, strides, offset, g),
                           PARTS["softmax"]) is None
    for x, t, c in PARTS["cross_entropy"].cases(rng):
        xt = tg.tensor(x, requires_grad=True)
        try:
            loss = xt.cross_entropy(tg.tensor(t))
            (loss * c).backward()
            got = (np.array(loss.item()), xt.grad.numpy())
        except IndexError:
            got = (np.array(-1.0), np.array(-1.0))
        assert compare(got, PARTS["cross_entropy"].reference(x, t, c), PARTS["cross_entropy"]) is None


def test_the_books_fit_classifier_is_the_judges_replay():
    rng = np.random.default_rng(5)
    for case in PARTS["fit_classifier"].cases(rng):
        W, X, y, X_val, y_val, lr, batch_size, epochs, patience, seed = case
        W_best, history = classification.fit_classifier(tg.tensor(W), tg.tensor(X), tg.tensor(y), tg.tensor(X_val),
                                                        tg.tensor(y_val), lr, batch_size, epochs, patience, seed)
        got = (W_best.numpy(), np.array(history["train_loss"]), np.array(history["val_loss"]),
               np.array(history["best_epoch"]))
        assert _check_fit(case, got) is None
    with pytest.raises(ValueError, match="at least 1"):
        classification.fit_classifier(tg.tensor(W), tg.tensor(X), tg.tensor(y), tg.tensor(X_val), tg.tensor(y_val),
                                      0.1, 0, 3, 1, 0)


# --- the 04-classification judge against the solutions notebook -------------------------------------------


def _kernel_without_cache(fn=None, **options):
    """teenygrad.kernels.kernel without the disk cache, which needs a source file (exec'd cells have none), and
    with bounds checks: a wrong kernel writes outside its buffer, which must raise, not corrupt memory."""
    wrap = numba.njit(boundscheck=True, **options) if JIT_ENABLED else (lambda f: f)
    return wrap(fn) if fn is not None else wrap


def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    """The solutions notebook's definitions, with numba's disk cache off for its kernels."""
    return notebook_namespace(SOLUTIONS, transform, after_exec=lambda ns: ns.__setitem__("kernel", _kernel_without_cache))


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
    """The hidden tests, with the notebook's functions installed in teenygrad (as its test cells do first)."""
    with contextlib.ExitStack() as stack:
        for part, pieces in tg.edition.parts(ASSIGNMENT).items():
            stack.enter_context(tg.edition.installed(ASSIGNMENT, part, *(namespace[p.name] for p in pieces)))
        return run_hidden(PARTS, namespace, hidden, parts, tmp_path, seed)


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS) == set(tg.edition.parts(ASSIGNMENT))
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        call = {"softmax": ".softmax(", "cross_entropy": ".cross_entropy("}.get(part, f"classification.{part}(")
        assert call in hidden  # graded through the package, with the learner's piece in it


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert _run_hidden(namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "precision and recall swapped": ("precision_recall_f1", "return precision.numpy(), recall.numpy(), f1.numpy()",
                                     "return recall.numpy(), precision.numpy(), f1.numpy()"),
    "0/0 left as nan": ("precision_recall_f1", "precision = hits / predicted.maximum(1.0)",
                        "precision = hits / predicted"),
    "F1 as the arithmetic mean": ("precision_recall_f1", "f1 = 2 * hits / (present + predicted).maximum(1.0)",
                                  "f1 = (precision + recall) / 2"),
    "softmax without the max": ("softmax", "out[o + n] = math.exp(x[start + n * sn] - top)",
                                "out[o + n] = math.exp(x[start + n * sn])"),
    "log-softmax as the log of the softmax": ("softmax", "out[o + n] = x[start + n * sn] - top - math.log(total)",
                                              "out[o + n] = math.log(out[o + n] / total)"),
    "rows read with the column stride": ("softmax", "row_softmax(x, x_offset + m * sm, N, sn, out, m * N, log)\n    ### END",
                                         "row_softmax(x, x_offset + m * N, N, 1, out, m * N, log)\n    ### END"),
    "softmax backward without the dot": ("softmax", "dx[row + k] = y[row + k] * (g[row + k] - gy)",
                                         "dx[row + k] = y[row + k] * g[row + k]"),
    "log-softmax backward with y for p": ("softmax", "math.exp(y[row + k]) * gsum", "y[row + k] * gsum"),
    "lse without its max": ("cross_entropy", "lse[r] = top + math.log(total)", "lse[r] = math.log(total)"),
    "negative targets let through": ("cross_entropy", "if not 0 <= t[r] < C:", "if t[r] >= C:"),
    "gradient without the scale": ("cross_entropy", "(p - 1.0 if c == t[r] else p) * scale", "(p - 1.0 if c == t[r] else p)"),
    "one shuffle for every epoch": ("fit_classifier", "for epoch in range(1, epochs + 1):\n        shuffled = rng.permutation(n)",
                                    "shuffled = rng.permutation(n)\n    for epoch in range(1, epochs + 1):"),
    "a new generator every epoch": ("fit_classifier", "shuffled = rng.permutation(n)",
                                    "shuffled = np.random.default_rng(seed).permutation(n)"),
    "the last short batch dropped": ("fit_classifier", "range(0, n, batch_size)", "range(0, n - batch_size + 1, batch_size)"),
    "the last weights, not the best": ("fit_classifier", "return best_W, history", "return W, history"),
    "patience counted from zero": ("fit_classifier", "if bad_epochs == patience:", "if bad_epochs > patience:"),
    "an equal loss counts as improving": ("fit_classifier", "if history[\"val_loss\"][-1] < best:",
                                          "if history[\"val_loss\"][-1] <= best:"),
    "the mean of batch losses unweighted": ("fit_classifier", "summed += len(idx) * Z.cross_entropy(y_b).item()",
                                            "summed += batch_size * Z.cross_entropy(y_b).item()"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, tmp_path, monkeypatch):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(replacing(part, old, new))
    verdicts = _run_hidden(namespace, hidden, [part], tmp_path, seed=5)
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


def _sgd_teenygrad():
    """The chapter's mini-batch run: a validation split of the training images, fit_classifier as the chapter calls it."""
    Z_train, Z_test, d_train, d_test = _digits_features()
    F_train, F_val, f_train, f_val = train_test_split(Z_train.astype(np.float32), d_train, test_fraction=0.2, seed=1)
    W, history = classification.fit_classifier(tg.zeros(Z_train.shape[1], 10), tg.tensor(F_train), tg.tensor(f_train),
                                               tg.tensor(F_val), tg.tensor(f_val), lr=1.0, batch_size=16, epochs=100,
                                               patience=5, seed=0)
    return dict(train_size=len(f_train), history=history,
                test_acc=classification.accuracy(tg.tensor(Z_test.astype(np.float32)) @ W, d_test))


def test_sgd_figures():
    run = _sgd_teenygrad()
    val, best = run["history"]["val_loss"], run["history"]["best_epoch"]
    assert run["train_size"] < 1437  # "trained on fewer images than the full-batch model"
    assert any(b > a for a, b in zip(val, val[1:]))  # "goes up and down from epoch to epoch"
    assert len(val) == best + 5 < 100  # stopped early, patience 5 after the best epoch
    assert (len(val), best) == (21, 16) and run["test_acc"] == pytest.approx(0.961, abs=0.004)


def test_chapter_sgd_figures_from_the_build(book_build):
    fig = book_figures("04-classification")
    run = _sgd_teenygrad()
    assert fig["ch4_sgd_train_size"] == run["train_size"]
    assert (fig["ch4_sgd_epochs"], fig["ch4_sgd_best_epoch"]) == (len(run["history"]["val_loss"]),
                                                                run["history"]["best_epoch"])
    assert fig["ch4_sgd_test_acc"] == pytest.approx(run["test_acc"], abs=1e-12)
