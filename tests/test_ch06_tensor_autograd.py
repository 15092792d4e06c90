"""Chapter 6's pieces: the engine (topological_order, backward) and the rules exercise 6 asks for (unbroadcast, the
reductions', the views' and cat's, eight elementwise ops) against numpy; the 06-tensor-autograd judge against
teenygrad's own pieces, the solutions notebook against the judge, plausible wrong answers rejected (one test per
typical mistake), and the chapter's structure and stated figures."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import teenygrad as tg
from autograder.judges.tensor_autograd import ERRORS, PARTS, _reduction
from teenygrad import edition
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.kernels.jit import JIT_ENABLED

from conftest import notebook_namespace, replacing, run_hidden, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "06-tensor-autograd.ipynb"
SOLUTIONS = REPO / "solutions" / "06-tensor-autograd.ipynb"
ASSIGNMENT = "06-tensor-autograd"
POINTS = {"backward": 4, "unbroadcast": 1, "reduction_rules": 2, "movement_rules": 2, "elementwise_rules": 3,
          "matmul_rules": 2, "kernel_launchers": 3}


def _grads(forward, inputs, w, noncontiguous=False):
    """Gradients of forward(*inputs) against upstream w, by teenygrad's backward (the rules in effect)."""
    leaves = [tg.tensor(np.asarray(x, dtype=np.float64)) for x in inputs]
    if noncontiguous:
        leaves = [tg.tensor(np.stack([x, x], axis=-1))[..., 0] for x in inputs]
    leaves = [t.requires_grad_() for t in leaves]
    forward(*leaves).backward(tg.tensor(np.asarray(w, dtype=np.float64)))
    return tuple(np.zeros(t.shape) if t.grad is None else t.grad.numpy() for t in leaves)


# --- the package's pieces (the book's answers) against numpy and finite differences ----------------------------

@settings(deadline=None, max_examples=60)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reduction_rules_against_numpy(shape, data):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)).map(sorted))
    keepdim, code = data.draw(st.booleans()), data.draw(st.integers(0, 2))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.integers(0, 3, size=shape).astype(np.float64)  # ties in most groups
    axis = tuple(axes) or None
    w = rng.normal(size=np.max(x, axis=axis, keepdims=keepdim).shape)
    reduce = [lambda t: t.sum(axis, keepdim=keepdim), lambda t: t.mean(axis, keepdim=keepdim),
              lambda t: t.max(axis, keepdim=keepdim)][code]
    (dx,) = _grads(reduce, [x], w, noncontiguous=data.draw(st.booleans()))
    np.testing.assert_allclose(dx, _reduction(code, x, np.array(axes, dtype=np.int64), keepdim, w, 0), rtol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_rules_agree_with_finite_differences(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 4, 2))  # distinct values: max is differentiable there
    tg.gradcheck(lambda t: t.max((0, 2)) * 1.0, [tg.tensor(x)])
    tg.gradcheck(lambda t: (t.sum(1) * t.mean((0, 2), keepdim=True).sum()), [tg.tensor(x)])
    tg.gradcheck(lambda t: t.permute(2, 0, 1)[1:, ::-1, None].reshape(-1).expand(2, 12) * 1.0, [tg.tensor(x)])
    a, b = rng.uniform(0.5, 2.0, size=(2, 3)), rng.uniform(-2, 2, size=(3,))
    tg.gradcheck(lambda a, b: a ** b + a / b + a.maximum(b) + a.sqrt().tanh().sigmoid().abs().relu(),
                 [tg.tensor(a), tg.tensor(b)])
    tg.gradcheck(lambda a, b: tg.cat([a, b], 1) * 1.0, [tg.tensor(rng.normal(size=(2, 1))), tg.tensor(rng.normal(size=(2, 3)))])


def test_the_rules_tables_run_the_pieces():
    """Installing a learner's function replaces what backward runs: every table entry of a piece is the marked one."""
    rules = {p.name: p for p in edition.pieces() if p.assignment == ASSIGNMENT and p.part.endswith("_rules")}
    assert len(rules) == 17
    names = {getattr(rule, "__name__", ""): op for op, rule in tg.ops.RULES.items()}
    for name in rules:
        assert name in names and getattr(tg.ops.RULES[names[name]], "__teenygrad_piece__", None), name


# --- the judge against teenygrad's own pieces, and the solutions notebook against the judge ------------------------

def _kernel_without_cache(fn=None, **options):
    """teenygrad.kernels.kernel without the disk cache, which needs a source file (exec'd cells have none), and with
    bounds checks: a wrong kernel (scatter_add's) writes outside its buffer, which must raise, not corrupt memory."""
    wrap = numba.njit(boundscheck=True, **options) if JIT_ENABLED else (lambda f: f)
    return wrap(fn) if fn is not None else wrap


def _notebook_namespace(transform=None, install=True) -> tuple[dict, dict]:
    """The notebook's setup and solution cells run, and its pieces installed in teenygrad (as its test cells do)."""
    namespace, hidden = notebook_namespace(SOLUTIONS, transform,
                                           after_exec=lambda ns: ns.__setitem__("kernel", _kernel_without_cache))
    if install:
        for part, pieces in edition.parts(ASSIGNMENT).items():
            edition.install(ASSIGNMENT, part, *(namespace[p.name] for p in pieces))
    return namespace, hidden


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
    try:
        return run_hidden(PARTS, namespace, hidden, parts, tmp_path, seed)
    finally:
        for part in PARTS:
            edition.uninstall(ASSIGNMENT, part)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_books_pieces_pass_the_judge(seed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(install=False)
    assert _run_hidden(namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert _run_hidden(namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    graphs = PARTS["backward"].cases(rng)
    assert max(len(c[2]) for c in graphs) >= 30_000, "a chain deeper than Python's recursion limit"
    assert any((c[1] == 0).any() for c in graphs) and any((c[2] == 3).any() for c in graphs), "constants, detach"
    assert any((c[3] == c[4]).any() and (c[2][c[3] == c[4]] < 2).any() for c in graphs), "x * x, x + x"
    assert len(ERRORS) == 10
    for name in ["unbroadcast", "reduction_rules", "movement_rules", "elementwise_rules", "matmul_rules",
                 "kernel_launchers"]:
        assert {c[-1] for c in PARTS[name].cases(rng)} == {0, 1}, f"{name}: contiguous and non-contiguous cases"
    assert {c[0] for c in PARTS["reduction_rules"].cases(rng)} == {0, 1, 2}
    assert {c[0] for c in PARTS["movement_rules"].cases(rng)} == {0, 1, 2, 3, 4}
    assert {c[0] for c in PARTS["elementwise_rules"].cases(rng)} == set(range(9))
    maxes = [c for c in PARTS["reduction_rules"].cases(rng) if c[0] == 2]
    assert any(len(c[2]) == 0 for c in maxes) and any(len(c[2]) >= 2 and c[2][1] - c[2][0] > 1 for c in maxes)
    assert any(0 in x.shape for c in PARTS["movement_rules"].cases(rng) for x in c[1:4] if c[0] == 4)
    kinks = [c[1] for c in PARTS["elementwise_rules"].cases(rng) if c[0] in (3, 4)]
    assert any((a == 0).any() for a in kinks), "relu and abs at 0"
    products = PARTS["matmul_rules"].cases(rng)
    assert any(0 in c[3] for c in products), "an operand that needs no gradient"
    assert any(c[0].ndim == 1 for c in products) and any(c[1].ndim == 1 for c in products), "1-D operands"
    assert any(c[0].ndim == 1 and 0 in c[3] for c in products), "a 1-D operand, the other needing no gradient"
    launches = PARTS["kernel_launchers"].cases(rng)
    assert {c[0] for c in launches} == set(range(5))
    assert any(np.abs(c[1]).max(initial=0) > 500 for c in launches if c[0] == 2), "cross-entropy: huge logits"
    assert any((c[2] < 0).any() for c in launches if c[0] == 4), "scatter_add: negative indices"


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    pieces = edition.parts(ASSIGNMENT)
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS) == set(pieces)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        for p in pieces[part]:
            assert f"def {p.name}(" in solutions[part]
        for other in set(PARTS) - {part}:  # each part is graded on its own (tg.unbroadcast: the grader's, installed)
            for p in pieces[other]:
                assert not re.search(rf"(?<![\w.]){p.name}\(", solutions[part]), (part, p.name)


RECURSIVE = """def _visit(t, order, seen):
    if t.grad_fn is None or id(t) in seen:
        return
    seen.add(id(t))
    for x in t.grad_fn.inputs:
        _visit(x, order, seen)
    order.append(t)


def topological_order(root):
    order = []
    _visit(root, order, set())
    return order


def _unused(root):
"""
WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "backward: a recursive topological order": ("backward", "def topological_order(root):\n", RECURSIVE),
    "backward: nodes in the order's own direction, not reversed": (
        "backward", "for t in reversed(topological_order(root)):", "for t in topological_order(root):"),
    "backward: a tensor used twice keeps only its last gradient": (
        "backward", "received[id(x)] = received[id(x)] + gx if id(x) in received else gx", "received[id(x)] = gx"),
    "backward: .grad overwritten, not accumulated": (
        "backward", "t.grad = g.clone() if t.grad is None else t.grad + g", "t.grad = g.clone()"),
    "backward: .grad accumulated in place": (
        "backward", "t.grad = g.clone() if t.grad is None else t.grad + g",
        "t.grad = g.clone() if t.grad is None else (t.grad._add_into(g) or t.grad)"),
    "backward: .grad is the gradient itself, shared": ("backward", "t.grad = g.clone() if", "t.grad = g if"),
    "backward: gradients not cast to the input's dtype": ("backward", "gx = gx.to(x.dtype)", "pass"),
    "backward: rules run with recording on": ("backward", "with tg.no_grad():", "if True:"),
    "backward: a rule's gradient shape not checked": ("backward", "if gx.shape != x.shape:", "if False:"),
    "backward: no check of in-place writes": ("backward", "node.check_versions()", "pass"),
    "backward: retain_grad ignored": ("backward", "if t._retain:", "if False:"),
    "unbroadcast: only the leading dims summed": ("unbroadcast", "summed.append(extra + d)", "pass"),
    "unbroadcast: a copy when the shape already matches": ("unbroadcast", "        return grad\n",
                                                            "        return grad.clone()\n"),
    "max: the mask, every tied maximum gets g": (
        "reduction_rules", "    where = x.argmax(axes)",
        "    return ((x == x.max(axes, keepdim=True)) * g.reshape(*(1 if d in axes else n for d, n in "
        "enumerate(shape))).expand(*shape),)\n    where = x.argmax(axes)"),
    "max: the axes not put back in place": ("reduction_rules", "return (dx.permute(*inverse),)",
                                            "return (dx.reshape(*shape),)"),
    "mean: without 1/n": ("reduction_rules", "(g * ctx.scale).reshape", "g.reshape"),
    "sum: g expanded without putting the reduced axes back": (
        "reduction_rules", "return (g.reshape(*as_kept).expand(*ctx.shape),)", "return (g.expand(*ctx.shape),)"),
    "permute: the same dims, not their inverse": ("movement_rules", "g.permute(*back)", "g.permute(*ctx.dims)"),
    "expand: only the leading dims summed": (
        "movement_rules", "return (tg.unbroadcast(g, ctx.shape),)",
        "return (g.sum(tuple(range(g.ndim - len(ctx.shape)))) if g.ndim > len(ctx.shape) else g,)"),
    "index: g written at the start of x, not where the view read": (
        "movement_rules", "dx[ctx.key] = g", "dx[tuple(slice(0, n) for n in g.shape)[:dx.ndim]] = g"),
    "cat: one element off": ("movement_rules", "slice(start, start + size)",
                             "slice(max(start - 1, 0), max(start - 1, 0) + size)"),
    "relu: 1 at the kink": ("elementwise_rules", "((ctx.x > 0) * g,)", "((ctx.x >= 0) * g,)"),
    "sigmoid: from x instead of out": ("elementwise_rules", "s = ctx.out", "s = ctx.x"),
    "div: db without the minus sign": ("elementwise_rules", "-(g * ctx.out) / b", "(g * ctx.out) / b"),
    "pow: the exponent's gradient without log a": ("elementwise_rules", "g * ctx.out * a.log()", "g * ctx.out"),
    "pow: the exponent not summed back": ("elementwise_rules", "tg.unbroadcast(g * ctx.out * a.log(), b.shape)",
                                          "(g * ctx.out * a.log()).sum().expand(*b.shape)"),
    "maximum: a tie goes to b": ("elementwise_rules", "a_wins = ctx.a >= ctx.b", "a_wins = ctx.a > ctx.b"),
    "maximum: a tie goes to both": ("elementwise_rules", "g * (1 - a_wins)", "g * (ctx.a <= ctx.b)"),
    "matmul: a size-1 batch dim of b not summed back": (
        "matmul_rules", "tg.unbroadcast(A.transpose(-1, -2) @ g, B.shape)",
        "(lambda p: p.sum(tuple(range(p.ndim - B.ndim))) if p.ndim > B.ndim else p)(A.transpose(-1, -2) @ g)"),
    "matmul: a 1-D b's dim not put back into g": ("matmul_rules", "g = g.unsqueeze(-1)  #", "pass  #"),
    "matmul: a 1-D a's dim not put back into g": ("matmul_rules", "g = g.unsqueeze(-2)", "pass"),
    "matmul: ctx.needs ignored, both gradients computed": ("matmul_rules", "if ctx.needs[1]:", "if True:"),
    "matmul: no transpose of b in da": ("matmul_rules", "g @ B.transpose(-1, -2)", "g @ B"),
    "softmax: the axis not moved last": (
        "kernel_launchers", "order = [d for d in range(y.ndim) if d != axis] + [axis]", "order = list(range(y.ndim))"),
    "softmax: log_softmax run on softmax's kernel": (
        "kernel_launchers", 'KERNELS[op + "_backward"]', 'KERNELS["softmax_backward"]'),
    "cross_entropy: g ignored": ("kernel_launchers", "g.item() / rows", "1.0 / rows"),
    "cross_entropy: divided by the classes, not the rows": (
        "kernel_launchers", "rows = ctx.targets.size", "rows = ctx.x.shape[1]"),
    "scatter_add: = instead of +=, repeats overwrite": (
        "kernel_launchers", "out[(o * n_out + j) * inner + i] += g[src]", "out[(o * n_out + j) * inner + i] = g[src]"),
    "scatter_add: a negative axis not normalised": ("kernel_launchers", "axis %= len(shape)", "pass"),
    "scatter_add: negative indices not counted from the end": (
        "kernel_launchers", "if j < 0:\n                    j += n_out", "if j < -n_out:\n                    j += n_out"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, tmp_path, monkeypatch, capsys):
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


def test_the_solutions_pieces_run_in_a_compiled_step():
    """Later chapters run on the learner's pieces: a step through tg.compile (chapter 10) differentiated by the
    solution's engine and rules, the index rule's `dx[key] = g` into fresh zeros included, gives eager's gradients."""
    rng = np.random.default_rng(0)
    w = tg.tensor(rng.normal(size=(6, 8)), requires_grad=True)
    x = tg.tensor(rng.normal(size=(5, 6)))

    def step(x):
        h = (x @ w).tanh()
        h = tg.cat([h[:, ::2], h[1:, 1::2].maximum(h[:-1, 1::2])], 0).permute(1, 0)
        loss = (h.sigmoid() ** 2 / 3 + h.max(0, keepdim=True) - h.mean(1, keepdim=True).relu()).sum()
        loss.backward()
        return loss

    def grad(run):
        w.zero_grad()
        run(x)
        return w.grad.numpy().copy()

    try:
        _notebook_namespace()
        eager, compiled = grad(step), grad(tg.compile(step))
    finally:
        for part in PARTS:
            edition.uninstall(ASSIGNMENT, part)
    np.testing.assert_allclose(compiled, eager, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grad(step), eager, rtol=1e-12, atol=1e-12)  # the book's pieces: the same
