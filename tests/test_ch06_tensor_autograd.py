"""Chapter 6's pieces: the rules exercise 6 asks for (max with ties, pow, maximum, cat) against numpy and finite
differences, the 06-tensor-autograd judge's references against teenygrad's own autograd, the solutions notebook
against the judge, plausible wrong rules rejected, and the chapter's structure and stated figures."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import teenygrad as tg
from autograder.judges.tensor_autograd import PARTS, _cat, _max, _maximum, _pow
from teenygrad import edition
from teenygrad.grading import GRADING_DIR_ENV

from conftest import notebook_namespace, replacing, run_hidden, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "06-tensor-autograd.ipynb"
SOLUTIONS = REPO / "solutions" / "06-tensor-autograd.ipynb"
ASSIGNMENT = "06-tensor-autograd"
POINTS = {"max_backward": 3, "pow_backward": 2, "maximum_backward": 1, "cat_backward": 1}



def _grads(forward, inputs, w, noncontiguous=False):
    """Gradients of forward(*inputs) against upstream w, by teenygrad's backward (the rules in effect)."""
    leaves = [tg.tensor(np.asarray(x, dtype=np.float64)) for x in inputs]
    if noncontiguous:
        leaves = [tg.tensor(np.stack([x, x], axis=-1))[..., 0] for x in inputs]
    leaves = [t.requires_grad_() for t in leaves]
    forward(*leaves).backward(tg.tensor(np.asarray(w, dtype=np.float64)))
    return tuple(np.zeros(t.shape) if t.grad is None else t.grad.numpy() for t in leaves)


# --- the package's rules (the book's answers) against numpy and finite differences ----------------------------

@settings(deadline=None, max_examples=60)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_max_rule_sends_each_groups_gradient_to_its_first_maximum(shape, data):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)).map(sorted))
    keepdim = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.integers(0, 3, size=shape).astype(np.float64)  # ties in most groups
    axis = tuple(axes) or None
    w = rng.normal(size=np.max(x, axis=axis, keepdims=keepdim).shape)
    (dx,) = _grads(lambda t: t.max(axis, keepdim=keepdim), [x], w, noncontiguous=data.draw(st.booleans()))
    np.testing.assert_allclose(dx, _max(x, np.array(axes, dtype=np.int64), keepdim, w, 0), rtol=1e-12)
    assert np.count_nonzero(dx) <= w.size  # never split or duplicated


@pytest.mark.parametrize("seed", range(3))
def test_rules_agree_with_finite_differences(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 4, 2))  # distinct values: max is differentiable there
    tg.gradcheck(lambda t: t.max((0, 2)) * 1.0, [tg.tensor(x)])
    a, b = rng.uniform(0.5, 2.0, size=(2, 3)), rng.uniform(-2, 2, size=(3,))
    tg.gradcheck(lambda a, b: a ** b, [tg.tensor(a), tg.tensor(b)])
    tg.gradcheck(lambda a, b: a.maximum(b), [tg.tensor(rng.normal(size=(2, 3))), tg.tensor(rng.normal(size=(3,)))])
    tg.gradcheck(lambda a, b: tg.cat([a, b], 1) * 1.0, [tg.tensor(rng.normal(size=(2, 1))), tg.tensor(rng.normal(size=(2, 3)))])


@pytest.mark.parametrize("name, forward, reference", [
    ("pow_backward", None, _pow), ("maximum_backward", lambda a, b: a.maximum(b), _maximum),
    ("cat_backward", None, _cat), ("max_backward", None, _max)])
def test_judge_references_match_teenygrads_autograd(name, forward, reference):
    for seed in range(3):
        for case in PARTS[name].cases(np.random.default_rng(seed)):
            if name == "pow_backward":
                a, b, w, nc, constant = case
                got = (_grads(lambda t: t ** float(b), [a], w, nc) if constant
                       else _grads(lambda s, t: s ** t, [a, b], w, nc))
            elif name == "cat_backward":
                *xs, axis, w, nc = case
                got = _grads(lambda *ts: tg.cat(list(ts), int(axis)), xs, w, nc)
            elif name == "max_backward":
                x, axes, keepdim, w, nc = case
                got = _grads(lambda t: t.max(tuple(axes.tolist()) or None, keepdim=bool(keepdim)), [x], w, nc)
            else:
                a, b, w, nc = case
                got = _grads(forward, [a, b], w, nc)
            want = reference(*case)
            for g, r in zip(got, want if isinstance(want, tuple) else (want,)):
                np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12, err_msg=f"{name}, seed {seed}")


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    for name, part in PARTS.items():
        flags = {c[-2] if name == "pow_backward" else c[-1] for c in part.cases(rng)}
        assert flags == {0, 1}, f"{name}: contiguous and non-contiguous cases"
    maxes = PARTS["max_backward"].cases(rng)
    assert any(len(ax) == 0 for _, ax, _, _, _ in maxes) and {k for _, _, k, _, _ in maxes} == {0, 1}
    assert any(len(ax) >= 2 and ax[1] - ax[0] > 1 for _, ax, _, _, _ in maxes)  # axes neither last nor adjacent
    tied = [x for x, ax, *_ in maxes if len(ax) == 1 and (np.sort(x, axis=int(ax[0]))[..., -1:] ==
                                                            np.sort(x, axis=int(ax[0]))[..., -2:-1]).any()]
    assert tied, "ties in the max cases"
    pows = PARTS["pow_backward"].cases(rng)
    assert any(c[-1] and (c[0] < 0).any() for c in pows) and any(np.ndim(c[1]) == 0 and not c[-1] for c in pows)
    assert any((a == b).any() for a, b, _, _ in PARTS["maximum_backward"].cases(rng) if np.shape(a) == np.shape(b))
    assert any(0 in x.shape for c in PARTS["cat_backward"].cases(rng) for x in c[:3])


# --- the solutions notebook against the judge -----------------------------------------------------------

def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    """The notebook's setup and solution cells run, and its rules installed in teenygrad (as its test cells do)."""
    namespace, hidden = notebook_namespace(SOLUTIONS, transform)
    for part, pieces in edition.parts(ASSIGNMENT).items():
        edition.install(ASSIGNMENT, part, *(namespace[p.name] for p in pieces))
    return namespace, hidden


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
    return run_hidden(PARTS, namespace, hidden, parts, tmp_path, seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert _run_hidden(namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS) == set(edition.parts(ASSIGNMENT))
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        head = solutions[part][:solutions[part].index("### BEGIN SOLUTION")]
        assert f"def {part}(" in head
        for other in set(PARTS) - {part}:  # each part is graded on its own
            assert f"{other}(" not in solutions[part].replace(f"def {part}(", "")


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "max: the chapter's mask, every tied maximum gets g": (
        "max_backward", "    where = x.argmax(axes)",
        "    return ((x == x.max(axes, keepdim=True)) * g.reshape(*(1 if d in axes else n for d, n in "
        "enumerate(shape))).expand(*shape),)\n    where = x.argmax(axes)"),
    "max: the axes not put back in place": ("max_backward", "return (dx.permute(*inverse),)",
                                            "return (dx.reshape(*shape),)"),
    "pow: the exponent's gradient without log a": ("pow_backward", "g * ctx.out * a.log()", "g * ctx.out"),
    "pow: the exponent not summed back": ("pow_backward", "tg.unbroadcast(g * ctx.out * a.log(), b.shape)",
                                          "(g * ctx.out * a.log()).sum().expand(*b.shape)"),
    "maximum: a tie goes to b": ("maximum_backward", "a_wins = ctx.a >= ctx.b", "a_wins = ctx.a > ctx.b"),
    "maximum: a tie goes to both": ("maximum_backward", "g * (1 - a_wins)", "g * (ctx.a <= ctx.b)"),
    "cat: one element off": ("cat_backward", "slice(start, start + size)", "slice(max(start - 1, 0), max(start - 1, 0) + size)"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_rules(mistake, tmp_path, monkeypatch, capsys):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(replacing(part, old, new))
    verdicts = _run_hidden(namespace, hidden, [part], tmp_path, seed=5)
    assert verdicts[part] is not None, mistake


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
