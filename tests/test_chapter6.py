"""Chapter 6's pieces: the 06-tensor-autograd judge (its numpy references against teenygrad's own autograd and
against finite differences), the solutions notebook against the judge, plausible wrong rules rejected, and the
chapter's structure and stated figures."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import teenygrad as tg
from autograder.judges.tensor_autograd import PARTS, TRAIN_ARGS, _matmul, _sum, _train_np, unbroadcast_np
from teenygrad.grading import GRADING_DIR_ENV

from conftest import notebook_namespace, replacing, run_hidden, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "06-tensor-autograd.ipynb"
SOLUTIONS = REPO / "solutions" / "06-tensor-autograd.ipynb"
POINTS = {"unbroadcast": 2, "add_backward": 1, "matmul_backward": 2, "sum_backward": 1}


# --- the judge's references -----------------------------------------------------------------------------

@st.composite
def broadcast_pair(draw):
    """(shape of a broadcast result, an input shape that broadcasts to it)."""
    out = tuple(draw(st.lists(st.integers(1, 4), min_size=0, max_size=4)))
    keep = draw(st.integers(0, len(out)))
    shape = tuple(1 if draw(st.booleans()) else n for n in out[len(out) - keep:])
    return out, shape


@settings(deadline=None, max_examples=60)
@given(broadcast_pair(), st.integers(0, 2**31))
def test_unbroadcast_reference_is_the_adjoint_of_broadcasting(pair, seed):
    """<unbroadcast(g), x> = <g, broadcast(x)> for all x: the defining property of the gradient."""
    out, shape = pair
    rng = np.random.default_rng(seed)
    g, x = rng.normal(size=out), rng.normal(size=shape)
    got = unbroadcast_np(g, shape)
    assert got.shape == shape
    assert np.isclose(np.sum(got * x), np.sum(g * np.broadcast_to(x, out)))


@settings(deadline=None, max_examples=40)
@given(broadcast_pair(), broadcast_pair(), st.integers(0, 2**31))
def test_add_reference_matches_teenygrads_autograd(pa, pb, seed):
    rng = np.random.default_rng(seed)
    sa, sb = pa[1], pb[1]
    try:
        out = np.broadcast_shapes(sa, sb)
    except ValueError:
        return
    a, b, w = rng.normal(size=sa), rng.normal(size=sb), rng.normal(size=out)
    A, B = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    (A + B).backward(tg.tensor(w))
    want = PARTS["add_backward"].reference(a, b, w, 0)
    np.testing.assert_allclose(A.grad.numpy(), want[0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(B.grad.numpy(), want[1], rtol=1e-12, atol=1e-12)


@settings(deadline=None, max_examples=40)
@given(st.sampled_from([((), ()), ((3,), ()), ((), (2,)), ((2, 3), (2, 3)), ((2, 1), (4,))]),
       st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**31))
def test_matmul_reference_matches_teenygrad_and_finite_differences(batches, m, k, n, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(*batches[0], m, k)), rng.normal(size=(*batches[1], k, n))
    w = rng.normal(size=np.matmul(a, b).shape)
    da, db = _matmul(a, b, w, 0)
    A, B = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
    (A @ B).backward(tg.tensor(w))
    np.testing.assert_allclose(A.grad.numpy(), da, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(B.grad.numpy(), db, rtol=1e-10, atol=1e-10)
    eps, loss = 1e-6, lambda a_, b_: np.sum(np.matmul(a_, b_) * w)
    for x, dx, f in [(a, da, lambda v: loss(v, b)), (b, db, lambda v: loss(a, v))]:
        numeric = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[i] = eps
            numeric[i] = (f(x + e) - f(x - e)) / (2 * eps)
        np.testing.assert_allclose(dx, numeric, rtol=1e-6, atol=1e-7)


@settings(deadline=None, max_examples=40)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_sum_reference_matches_teenygrads_autograd(shape, data):
    shape = tuple(shape)
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), max_size=len(shape), unique_by=lambda a: a % len(shape)))
    keepdim = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.normal(size=shape)
    axis = tuple(axes) or None
    w = rng.normal(size=np.sum(x, axis=axis, keepdims=keepdim).shape)
    X = tg.tensor(x, requires_grad=True)
    X.sum(axis, keepdim=keepdim).backward(tg.tensor(w))
    np.testing.assert_allclose(X.grad.numpy(), _sum(x, np.array(axes, dtype=np.int64), keepdim, w, 0), rtol=1e-12)


def test_training_reference_matches_teenygrads_autograd():
    namespace, _ = _notebook_namespace()
    case = PARTS["add_backward"].cases(np.random.default_rng(3))[-1]
    assert len(case) == TRAIN_ARGS
    want = _train_np(*case)
    assert len(want) == case[-1] + 1 and want[-1] < 0.8 * want[0]  # the loss falls, visibly
    np.testing.assert_allclose(namespace["train_softmax_regression"](*case), want, rtol=1e-10)


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    for name, part in PARTS.items():
        cases = part.cases(rng)
        assert len(cases[-1]) == TRAIN_ARGS and all(len(c) < TRAIN_ARGS for c in cases[:-1]), name
        assert {c[-1] for c in cases[:-1]} == {0, 1}, f"{name}: contiguous and non-contiguous cases"
    shapes = [(g.shape, tuple(s)) for g, s, _ in PARTS["unbroadcast"].cases(rng)[:-1]]
    assert any(s == () for _, s in shapes) and any(g == s for g, s in shapes)  # to a scalar; nothing to do
    assert any(len(g) > len(s) and 1 in s for g, s in shapes)  # leading dims and size-1 dims at once
    mm = [(a.shape, b.shape) for a, b, _, _ in PARTS["matmul_backward"].cases(rng)[:-1]]
    assert any(len(a) == 3 and len(b) == 2 for a, b in mm) and any(len(a) == 2 and len(b) == 3 for a, b in mm)
    assert any(len(a) == len(b) >= 3 for a, b in mm)  # batched on both sides
    sums = PARTS["sum_backward"].cases(rng)[:-1]
    assert any(len(ax) == 0 for _, ax, _, _, _ in sums) and any((ax < 0).any() for _, ax, _, _, _ in sums)
    assert {k for _, _, k, _, _ in sums} == {0, 1}


# --- the solutions notebook against the judge -----------------------------------------------------------

def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    return notebook_namespace(SOLUTIONS, transform)


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
    return run_hidden(PARTS, namespace, hidden, parts, tmp_path, seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert _run_hidden(namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        head = solutions[part][:solutions[part].index("### BEGIN SOLUTION")]
        assert f"def {part}(" in head
        # each part is graded on its own: no other part's function in its solution or its hidden tests
        for other in set(PARTS) - {part}:
            assert f"{other}(" not in solutions[part].replace(f"def {part}(", "")
            assert f"{other}(" not in hidden.replace(f"def run_{part}(", "")


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "unbroadcast forgets the size-1 (keepdim) dims": ("unbroadcast", "axes = tuple(range(lead)) + stretched",
                                                      "axes = tuple(range(lead))"),
    "unbroadcast sums the kept dims away": ("unbroadcast", "return grad.sum(axes, keepdim=True).reshape(shape)",
                                            "return grad.sum(axes)"),
    "unbroadcast sums every size-1 dim, stretched or not": ("unbroadcast", "if n == 1 and grad.shape[lead + d] != 1",
                                                            "if n == 1 or d == 0"),
    "add sums only leading dims": ("add_backward", "axes = tuple(range(lead)) + tuple(", "axes = tuple(range(lead)) or tuple("),
    "add passes g through unchanged": ("add_backward", "grads.append(g.sum(axes, keepdim=True).reshape(x.shape))",
                                       "grads.append(g)"),
    "matmul with the transposes swapped": ("matmul_backward", "da = g @ b.transpose(-1, -2)",
                                           "da = g.transpose(-1, -2) @ b"),
    "matmul dB without the transpose of A": ("matmul_backward", "db = a.transpose(-1, -2) @ g",
                                             "db = (g.transpose(-1, -2) @ a).transpose(-1, -2).transpose(-1, -2)"),
    "matmul forgets to sum a shared matrix over the batch": ("matmul_backward", "db = db.sum(tuple(range(db.ndim - b.ndim)))",
                                                             "db = db[0]"),
    "sum expands without putting the axes back": ("sum_backward", "g.reshape(kept).expand(*ctx.shape)",
                                                  "g.expand(*ctx.shape)"),
    "sum returns g times the count": ("sum_backward", "return (g.reshape(kept).expand(*ctx.shape),)",
                                      "return (g.reshape(kept).expand(*ctx.shape) * 2,)"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_rules(mistake, tmp_path, monkeypatch, capsys):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(replacing(part, old, new))
    verdicts = _run_hidden(namespace, hidden, [part], tmp_path, seed=5)
    assert verdicts[part] is not None, mistake


def test_training_case_alone_catches_a_wrong_rule(tmp_path, monkeypatch, capsys):
    """A rule right on shapes but off by a constant changes the whole loss trajectory."""
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, _ = _notebook_namespace()
    case = PARTS["matmul_backward"].cases(np.random.default_rng(0))[-1]
    right = namespace["matmul_backward"]
    half = lambda ctx, g: tuple(x * 0.5 for x in right(ctx, g))
    got = namespace["train_softmax_regression"](*case, matmul=half)
    assert not np.allclose(got, _train_np(*case), rtol=PARTS["matmul_backward"].rtol)


# --- the chapter ---------------------------------------------------------------------------------------------

# The chapter's house rules (title, headings, outputs, exercise link): tests/test_notebooks.py


def test_every_figure_in_the_prose_is_glued_by_the_code():
    nb = nbformat.read(CHAPTER, as_version=4)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "".join(c.source for c in nb.cells if c.cell_type == "code")
    used = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)", prose))
    glued = set(re.findall(r'glue\("([a-z0-9_]+)"', code))
    assert used == {"ch6_test_accuracy", "ch6_final_loss"}
    assert used <= glued


def test_figures_stated_in_the_prose():
    """The digits run recomputed in numpy float64 with the hand-derived gradient (the chapter runs float32)."""
    from teenygrad.datasets import load_digits
    from teenygrad.preprocessing import train_test_split

    pixels, labels = load_digits()
    X_train, X_test, y_train, y_test = train_test_split(pixels / 16.0, labels, test_fraction=0.2, seed=0)
    W = np.random.default_rng(0).normal(size=(64, 10)).astype(np.float32).astype(np.float64) * 0.01
    b, Y, n = np.zeros(10), np.eye(10)[y_train], len(X_train)
    for _ in range(300):
        Z = X_train @ W + b
        Z = Z - Z.max(1, keepdims=True)
        P = np.exp(Z) / np.exp(Z).sum(1, keepdims=True)
        loss = -np.mean(np.log(P[np.arange(n), y_train]))
        dZ = (P - Y) / n
        W, b = W - 0.5 * X_train.T @ dZ, b - 0.5 * dZ.sum(0)
    accuracy = 100 * np.mean((X_test @ W + b).argmax(1) == y_test)
    assert abs(loss - 0.224) < 0.002 and f"{loss:.2f}" == "0.22"  # "falls to about 0.22 after 300 steps"
    assert abs(accuracy - 96.39) < 0.3  # "gets 96.4% of the test digits right" (one digit is 0.28%)
    # "row 0 alone contributes 1000": logsumexp(1000, 0, -1000) - 0 in the cross-entropy example
    assert float(tg.cross_entropy(tg.tensor([[1000.0, 0.0, -1000.0]]), tg.tensor([1]))) == 1000.0
