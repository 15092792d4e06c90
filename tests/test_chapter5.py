"""Chapter 5's pieces: the 05-scalar-autograd judge (its plain-Python references against teenygrad.Value and
the tape on random graphs, its topological-order check), the solutions notebook against the judge, plausible
wrong answers rejected, and the chapter (structure, and the figures its prose states). No timing assertions."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autograder.judges.scalar_autograd import ADD, MUL, PARTS, SUB, TANH, _graph, _topo_check, forward_backward
from teenygrad import tape as T
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.value import Value, topological_order

from conftest import executed_figures, notebook_namespace, replacing, run_hidden, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "05-scalar-autograd.ipynb"
SOLUTIONS = REPO / "solutions" / "05-scalar-autograd.ipynb"
POINTS = {"mul_op": 2, "topological_order": 2, "tanh_opcode": 2}
FUNCTIONS = {"mul_op": ["mul_op"], "topological_order": ["topological_order"],
             "tanh_opcode": ["tanh_forward", "tanh_backward"]}


def as_values(x, op, a, b):
    leaves = [Value(v) for v in x.tolist()]
    nodes = list(leaves)
    for code, i, j in zip(op.tolist(), a.tolist(), b.tolist()):
        u = nodes[i]
        nodes.append({ADD: lambda: u + nodes[j], SUB: lambda: u - nodes[j], MUL: lambda: u * nodes[j],
                      TANH: lambda: u.tanh()}[code]())
    return leaves, nodes


def sane(nodes) -> bool:
    """No overflow: a product of products can reach 1e35 or inf, where a different order of the same sums (the
    tape's) differs by more than rounding, and nan equals nothing."""
    return all(np.isfinite(v.data) and abs(v.data) < 1e6 for v in nodes)


graphs = st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 8), st.integers(1, 60), st.floats(0.0, 0.7))


# --- the judge's references against teenygrad -------------------------------------------------------------

@settings(deadline=None, max_examples=80)
@given(graphs)
def test_reference_matches_teenygrad_values(params):
    seed, n, m, p_mul = params
    x, op, a, b = _graph(np.random.default_rng(seed), n, m, p_mul)
    leaves, nodes = as_values(x, op, a, b)
    assume(sane(nodes))
    nodes[-1].backward()
    value, grads = forward_backward(x, op, a, b)
    assert value == pytest.approx(nodes[-1].data, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(grads, [v.grad for v in leaves], rtol=1e-10, atol=1e-12)


@settings(deadline=None, max_examples=40)
@given(graphs)
def test_reference_matches_the_tape(params):
    seed, n, m, p_mul = params
    x, op, a, b = _graph(np.random.default_rng(seed), n, m, p_mul)
    leaves, nodes = as_values(x, op, a, b)
    assume(sane(nodes))
    tape = T.compile(nodes[-1], inputs=leaves)
    loss = tape.forward()
    tape.backward()
    value, grads = forward_backward(x, op, a, b)
    assert loss == pytest.approx(value, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(tape.grad[tape.slots(leaves)], grads, rtol=1e-10, atol=1e-12)


def test_cases_have_reuse_and_every_op():
    for name in ("mul_op", "tanh_opcode"):
        cases = PARTS[name].cases(np.random.default_rng(0))
        ops = np.concatenate([c[1] for c in cases])
        assert set(ops.tolist()) == {ADD, SUB, MUL, TANH}
        assert any(np.any((c[1] == MUL) & (c[2] == c[3])) for c in cases), "some x * x"
        assert any(len(c[0]) == 1 for c in cases), "a single leaf"
        assert all(np.any(c[1] == TANH) for c in PARTS["tanh_opcode"].cases(np.random.default_rng(1)))


def _topo_graph(case):
    n_leaves, a, b, root = case
    nodes = [Value(0.1 * k) for k in range(n_leaves)]
    for i, j in zip(a.tolist(), b.tolist()):
        nodes.append(nodes[i].tanh() if j < 0 else nodes[i] + nodes[j])
    return nodes, nodes[root]


def _positions(nodes, order):
    number = {id(v): k for k, v in enumerate(nodes)}
    return (np.array([number.get(id(v), -1) for v in order], dtype=np.int64),)


@pytest.mark.parametrize("seed", range(5))
def test_topo_check_accepts_valid_orders_and_rejects_invalid_ones(seed):
    for case in PARTS["topological_order"].cases(np.random.default_rng(seed)):
        nodes, root = _topo_graph(case)
        order = topological_order(root)
        assert _topo_check(case, _positions(nodes, order)) is None
        # another valid order: breadth-first depth levels, deepest first (Kahn's algorithm on the reversed graph)
        depth = {}
        for v in order:
            depth[id(v)] = 1 + max((depth[id(c)] for c in v.children), default=-1)
        other = sorted(order, key=lambda v: (depth[id(v)], -id(v)))
        assert _topo_check(case, _positions(nodes, other)) is None
        if len(order) > 1:
            assert _topo_check(case, _positions(nodes, order[::-1])) is not None  # parents first
            assert _topo_check(case, _positions(nodes, order[:-1])) is not None  # root missing
            assert _topo_check(case, _positions(nodes, [order[0], *order])) is not None  # a node twice
        outside = [v for v in nodes if id(v) not in {id(u) for u in order}]
        if outside:
            assert "does not depend" in _topo_check(case, _positions(nodes, [outside[0], *order]))
        assert _topo_check(case, (np.array([0.5]),)) is not None
        assert _topo_check(case, (np.array([len(nodes) + 3]),)) is not None


# --- the solutions notebook ------------------------------------------------------------------------------

def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    return notebook_namespace(SOLUTIONS, transform)


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
    return run_hidden(PARTS, namespace, hidden, parts, tmp_path, seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert _run_hidden(namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        for other in set(FUNCTIONS) - {part}:  # each part is graded on its own function(s) only
            assert not any(re.search(rf"\b{fn}\(", hidden) for fn in FUNCTIONS[other]), (part, other)
        for fn in FUNCTIONS[part]:  # defined outside the solution markers, so a released exercise defines it
            assert f"def {fn}(" in solutions[part]
            assert solutions[part].index(f"def {fn}(") < solutions[part].rindex("### BEGIN SOLUTION")


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "mul backward swaps the operands": ("mul_op", "return a * b, (b, a)", "return a * b, (a, b)"),
    "mul backward forgets the second operand": ("mul_op", "return a * b, (b, a)", "return a * b, (b, 0.0)"),
    "mul backward is the product": ("mul_op", "return a * b, (b, a)", "return a * b, (a * b, a * b)"),
    "mul forward adds": ("mul_op", "return a * b, (b, a)", "return a + b, (b, a)"),
    "DFS without a visited set lists a reused node twice": (
        "topological_order", "        if id(node) in visited:\n            return\n", ""),
    "node before its children (pre-order)": (
        "topological_order", "        visited.add(id(node))\n",
        "        visited.add(id(node))\n        order.append(node)\n"),
    "root left out": ("topological_order", "    return order\n", "    return order[:-1]\n"),
    "tanh backward assigns instead of adding": ("tanh_opcode", "grad[a[i]] += (1.0", "grad[a[i]] = (1.0"),
    "tanh backward uses the operand, not the result": (
        "tanh_opcode", "(1.0 - data[i] * data[i])", "(1.0 - data[a[i]] * data[a[i]])"),
    "tanh backward forgets grad[i]": ("tanh_opcode", " * grad[i]", ""),
    "tanh forward reads its own slot": ("tanh_opcode", "data[i] = math.tanh(data[a[i]])", "data[i] = math.tanh(data[i])"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, tmp_path, monkeypatch):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(replacing(part, old, new))
    verdicts = _run_hidden(namespace, hidden, [part], tmp_path, seed=5)
    assert verdicts[part] is not None, mistake


# --- the chapter -------------------------------------------------------------------------------------------

def test_chapter_names_its_benchmark_and_glues_its_figures():
    """Chapter 5's own rules; the house rules (title, headings, outputs, exercise link): tests/test_notebooks.py."""
    nb = nbformat.read(CHAPTER, as_version=4)
    assert "benchmarks/scalar_autograd.py" in "".join(c.source for c in nb.cells)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "".join(c.source for c in nb.cells if c.cell_type == "code")
    used = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)", prose))
    glued = set(re.findall(r'glue\("([a-z0-9_]+)"', code))
    assert used and used <= glued, f"stated but never glued: {sorted(used - glued)}"


@pytest.fixture(scope="module")
def chapter_figures() -> dict[str, float]:
    """Run the chapter in a fresh kernel (about a minute) and collect what it glued."""
    return executed_figures(nbformat.read(CHAPTER, as_version=4), CHAPTER.parent)


def test_chapter_figures(chapter_figures):
    fig = chapter_figures
    assert fig["ch5_diamond_wrong"] == pytest.approx(1.0)  # breadth first misses the path through tanh
    assert fig["ch5_diamond_right"] == pytest.approx(1.940015, abs=1e-6)
    assert fig["ch5_gradcheck_rel"] < 1e-6
    assert fig["ch5_xor_loss"] < 1e-6  # "rounds to its target"
    assert fig["ch5_digits_value_acc"] == pytest.approx(0.897, abs=0.03)
    assert fig["ch5_digits_tape_acc"] == pytest.approx(0.98, abs=0.02)
    assert fig["ch5_digits_tape_acc"] > fig["ch5_digits_value_acc"]
    assert (fig["ch5_slots"], fig["ch5_fused_slots"], fig["ch5_fused_dots"]) == (3727, 1367, 27)  # 26 neurons + 1
    # timings are machine-dependent: only that they were measured and the tape won
    assert fig["ch5_speedup"] > 1 and fig["ch5_speedup_fit"] > 1 and fig["ch5_value_rate"] > 0
    assert fig["ch5_speedup_fused"] > 1
    # the diamonds: 6 * 2^k - 5 calls path by path, counted by the chapter; fifty diamonds' time from its rate
    assert (fig["ch5_nodes_15"], fig["ch5_calls_15"], fig["ch5_calls_50"]) == (76, 6 * 2**15 - 5, 6 * 2**50 - 5)
    assert fig["ch5_calls_per_second"] > 0
    assert fig["ch5_years_50"] == pytest.approx(fig["ch5_calls_50"] / fig["ch5_calls_per_second"] / 31_557_600)
    # the digits: parameters, nodes per example, and the steps of each training
    assert fig["ch5_digits_params"] == 64 * 16 + 16 + 16 * 10 + 10
    from teenygrad.datasets import load_digits
    from teenygrad.value_nn import MLP, cross_entropy
    X, y = load_digits()
    graph = cross_entropy(MLP(64, [16, 10], seed=0)((X[0] / 16.0).tolist()), int(y[0]))  # any example: same shape
    assert fig["ch5_nodes_per_example"] == len(topological_order(graph))
    assert (fig["ch5_value_steps"], fig["ch5_train_images"], fig["ch5_tape_steps"]) == (600, 1497, 14970)
