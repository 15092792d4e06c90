"""Chapter 5's pieces: what exercise 5 asks for (teenygrad.value's topological_order, Value.backward and rules;
teenygrad.tape.compile; teenygrad.tape_fuse.find_chains) against plain Python, finite differences and the unfused
tape; the 05-scalar-autograd judge's references against teenygrad; the solutions notebook against the judge;
plausible wrong answers rejected; and the chapter (structure, and the figures its prose states). No timing
assertions."""
from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.judges.scalar_autograd import (
    ADD,
    DIV,
    MAX,
    MUL,
    PARTS,
    POW,
    RULE_CODES,
    SIGMOID,
    SUB,
    TANH,
    TAPE_OPCODE,
    _backward_reference,
    _compile_reference,
    _graph,
    _mlp_graph,
    _rules_reference,
    forward_backward,
    fusion_counts,
)
from teenygrad import edition
from teenygrad import tape as T
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.tape_fuse import DOT, fuse
from teenygrad.tape_fuse import find_chains as book_find_chains
from teenygrad.value import RULES, Value, gradient_check, topological_order

from conftest import book_figures, notebook_namespace, replacing, run_hidden, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "05-scalar-autograd.ipynb"
SOLUTIONS = REPO / "solutions" / "05-scalar-autograd.ipynb"
ASSIGNMENT = "05-scalar-autograd"
POINTS = {"backward": 2, "rules": 2, "compile": 2, "find_chains": 2}
ALL_OPS = {ADD: 0.2, SUB: 0.1, MUL: 0.25, TANH: 0.1, DIV: 0.1, MAX: 0.15, SIGMOID: 0.1}



def as_values(x, op, a, b):
    leaves = [Value(v) for v in x.tolist()]
    nodes = list(leaves)
    for code, i, j in zip(op.tolist(), a.tolist(), b.tolist()):
        u = nodes[i]
        nodes.append({ADD: lambda: u + nodes[j], SUB: lambda: u - nodes[j], MUL: lambda: u * nodes[j],
                      TANH: lambda: u.tanh(), DIV: lambda: u / nodes[j], MAX: lambda: u.max(nodes[j]),
                      SIGMOID: lambda: u.sigmoid()}[code]())
    return leaves, nodes


# --- the package's pieces (the book's answers) -------------------------------------------------------------

@settings(deadline=None, max_examples=60)
@given(st.floats(-1000, 1000, allow_nan=False))
def test_sigmoid_rule_is_stable_and_exact(z):
    s, (ds,) = RULES["sigmoid"](z)
    exact = 1 / (1 + math.exp(-z)) if z > -700 else math.exp(z)  # the formula, where it does not overflow
    assert s == pytest.approx(exact, rel=1e-12, abs=0 if z > -700 else 1e-300)
    assert ds == pytest.approx(s * (1 - s), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("seed", range(4))
def test_div_and_max_rules_against_finite_differences(seed):
    xs = np.random.default_rng(seed).uniform(-2, 2, size=3).tolist()

    def f(v):
        x, y, z = v
        return ((x + 2.0) / (y * y + 1.0)).max(z * x) / (z - 3.0) + (x * y).sigmoid()

    analytic, numeric = gradient_check(f, xs)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)
    assert RULES["max"](2.0, 2.0) == (2.0, (1.0, 0.0))  # a tie goes to the first operand


@settings(deadline=None, max_examples=60)
@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.integers(1, 80))
def test_judge_reference_matches_teenygrad_values_and_the_tape(seed, n, m):
    x, op, a, b = _graph(np.random.default_rng(seed), n, m, ALL_OPS, ties=seed % 2 == 0)
    leaves, nodes = as_values(x, op, a, b)
    nodes[-1].backward()
    value, grads = forward_backward(x, op, a, b)
    assert value == pytest.approx(nodes[-1].data, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(grads, [v.grad for v in leaves], rtol=1e-9, atol=1e-12)
    tape = T.compile(nodes[-1], inputs=leaves)
    assert tape.forward() == pytest.approx(value, rel=1e-12, abs=1e-12)
    tape.backward()
    np.testing.assert_allclose(tape.grad[tape.slots(leaves)], grads, rtol=1e-9, atol=1e-12)


def _fused(case):
    leaves, nodes = as_values(*case)
    plain = T.compile(nodes[-1], params=leaves)
    return plain, fuse(plain)


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_find_chains_fuses_what_the_judge_counts_and_computes_the_same(seed, mlp):
    rng = np.random.default_rng(seed)
    case = (_mlp_graph(rng, int(rng.integers(1, 6)), [int(w) for w in rng.integers(1, 5, size=rng.integers(1, 4))])
            if mlp else _graph(rng, int(rng.integers(1, 6)), int(rng.integers(1, 60)), {MUL: 0.5, ADD: 0.3, SUB: 0.1, TANH: 0.1}))
    plain, fused = _fused(case)
    chains = book_find_chains(plain.opcode, plain.a.astype(np.int64), plain.b.astype(np.int64), plain.n_leaves)
    assert (len(fused), int(np.sum(fused.opcode == DOT)), len(fused.dot_a)) == fusion_counts(*case)
    assert len(chains) == int(np.sum(fused.opcode == DOT))
    for t in (plain, fused):
        t.forward()
        t.backward()
    assert fused.loss == pytest.approx(plain.loss, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(fused.param_grads, plain.param_grads, rtol=1e-9, atol=1e-12)


NAMES = ["add", "sub", "mul", "tanh", "div", "max", "sigmoid", "pow", "neg", "exp", "log", "relu"]  # the judge's codes


def test_judge_knows_the_tapes_opcodes():
    assert {NAMES[c]: code for c, code in TAPE_OPCODE.items()} == {k: v for k, v in T.OPCODES.items() if k}


def test_judge_backward_reference_matches_teenygrad():
    for case in PARTS["backward"].cases(np.random.default_rng(1)):
        x, a, b, la, lb = case
        nodes = [Value(v) for v in x.tolist()]
        for i, j, gi, gj in zip(a.tolist(), b.tolist(), la.tolist(), lb.tolist()):
            nodes.append(Value(0.0, (nodes[i],) if j < 0 else (nodes[i], nodes[j]), "f", (gi,) if j < 0 else (gi, gj)))
        number = {id(v): k for k, v in enumerate(nodes)}
        order, first, second = _backward_reference(*case)
        assert [number[id(v)] for v in topological_order(nodes[-1])] == order.tolist()
        nodes[-1].backward()
        np.testing.assert_allclose([v.grad for v in nodes], first, rtol=1e-9, atol=1e-12)
        nodes[-1].backward()
        np.testing.assert_allclose([v.grad for v in nodes], second, rtol=1e-9, atol=1e-12)


def test_judge_rules_reference_matches_teenygrad():
    ops = {SUB: "sub", DIV: "div", MAX: "max", POW: "pow"}
    cases = PARTS["rules"].cases(np.random.default_rng(2))
    assert {c[0] for c in cases} == set(RULE_CODES)
    for code, u, v in cases:
        rule = RULES[ops.get(code, NAMES[code])]
        got = [rule(p, q) if code in ops else rule(p) for p, q in zip(u.tolist(), v.tolist())]
        want = _rules_reference(code, u, v)
        assert [r for r, _ in got] == want[0].tolist() and [list(g) for _, g in got] == want[1].tolist()
        assert PARTS["rules"].check((code, u, v), want) is None


def test_judge_compile_reference_matches_teenygrad():
    for x, op, a, b, k, params, inputs, schedule in PARTS["compile"].cases(np.random.default_rng(3)):
        nodes = [Value(v) for v in x.tolist()]
        for code, i, j, e in zip(op.tolist(), a.tolist(), b.tolist(), k.tolist()):
            kids = (nodes[i],) if j < 0 else (nodes[i], nodes[j])
            nodes.append(Value(0.0, kids, NAMES[code], (0.0,) * len(kids), e if NAMES[code] == "pow" else None))
        listed = [[nodes[p] if p >= 0 else 1.5 for p in group.tolist()] for group in (params, inputs)]
        want = _compile_reference(x, op, a, b, k, params, inputs, schedule)
        try:
            tape = T.compile(nodes[-1], inputs=listed[1], params=listed[0], schedule=schedule)
        except (TypeError, ValueError) as e:
            assert want == (1 if isinstance(e, TypeError) else 2), e
            continue
        got = (tape.opcode, tape.a, tape.b, tape.arg, np.array([tape.n_params, tape.n_inputs, tape.n_leaves]),
               tape.slots(nodes))
        assert PARTS["compile"].check((x, op, a, b, k, params, inputs, schedule), got) is None


def test_fuse_refuses_chains_that_would_lose_a_value():
    h, w0, x0, w1, x1 = (Value(v) for v in (0.5, 1.0, 2.0, -1.0, 3.0))
    s0 = h + w0 * x0
    loss = (s0 + w1 * x1) * s0  # s0 is read twice: it can't be fused away
    plain = T.compile(loss, params=[h, w0, x0, w1, x1])
    slot = {name: int(plain.slots([v])[0]) for name, v in [("h", h), ("s0", s0), ("s1", loss.children[0])]}
    m = [int(plain.a[slot["s0"]] if plain.opcode[plain.a[slot["s0"]]] == T.MUL else plain.b[slot["s0"]]),
         int(plain.b[slot["s1"]] if plain.opcode[plain.b[slot["s1"]]] == T.MUL else plain.a[slot["s1"]])]

    def find_chains(opcode, a, b, n_leaves):  # a learner's greedy chain, across the shared partial sum
        return {slot["s1"]: (slot["h"], m)}

    with edition.installed(ASSIGNMENT, "find_chains", find_chains):
        with pytest.raises(ValueError, match="used elsewhere"):
            fuse(plain)
    assert int(np.sum(fuse(plain).opcode == DOT)) == 2  # the book's: two chains, s0's and s1's


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    back = PARTS["backward"].cases(rng)
    assert max(len(c[1]) for c in back) >= 30_000, "a chain deeper than any recursion limit"
    assert any(np.any(c[1] == c[2]) for c in back), "x op x: a child used twice by one node"
    rules = PARTS["rules"].cases(rng)
    scores = np.concatenate([u for code, u, _ in rules if code == SIGMOID])
    assert scores.min() <= -1000 and scores.max() >= 1000
    assert any(code == MAX and np.any(u == v) for code, u, v in rules), "ties for max"
    comp = PARTS["compile"].cases(rng)
    assert {int(c) for case in comp for c in case[1].tolist()} == set(range(12)), "every op"
    assert sum(isinstance(_compile_reference(*c), int) for c in comp) >= 5, "graphs compile must refuse"
    chains = PARTS["find_chains"].cases(rng)
    assert set(np.concatenate([c[1] for c in chains]).tolist()) <= {ADD, SUB, MUL, TANH}
    counts = [fusion_counts(*c) for c in chains]
    assert all(dots >= 1 for _, dots, _ in counts)


# --- the solutions notebook ------------------------------------------------------------------------------

def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    """The notebook's setup and solution cells run, and its pieces installed in teenygrad (as its test cells do)."""
    namespace, hidden = notebook_namespace(SOLUTIONS, transform)
    for part, pieces in edition.parts(ASSIGNMENT).items():
        edition.install(ASSIGNMENT, part, *(namespace[p.name] for p in pieces))
    return namespace, hidden


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
    return run_hidden(PARTS, namespace, hidden, parts, tmp_path, seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert _run_hidden(namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS) == set(edition.parts(ASSIGNMENT))
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        for piece in edition.parts(ASSIGNMENT)[part]:  # defined outside the markers: the exercise defines it
            assert f"def {piece.name}(" in solutions[part]
            assert solutions[part].index(f"def {piece.name}(") < solutions[part].rindex("### BEGIN SOLUTION")


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "order: children last first": ("backward", "for child in reversed(node.children):", "for child in node.children:"),
    "order: recursive (fails on a deep chain)": (
        "backward", "    order = []\n    seen = set()",
        "    order, seen = [], set()\n\n    def visit(v):\n        if id(v) not in seen:\n            seen.add(id(v))\n"
        "            for c in v.children:\n                visit(c)\n            order.append(v)\n\n    visit(root)\n"
        "    return order\n    seen = set()"),
    "backward: = instead of +=": ("backward", "child.grad += local * node.grad", "child.grad = local * node.grad"),
    "backward: leaves reset too": ("backward", "        if node.children:  # interior", "        if True:  # interior"),
    "backward: interior not reset": ("backward", "        if node.children:  # interior", "        if False:  # interior"),
    "sigmoid as typed: overflows below -709": ("rules", "    if a >= 0.0:  # e^-a", "    if True:  # e^-a"),
    "sigmoid as 1 - sigmoid(-a): small values rounded away": (
        "rules", "        e = math.exp(a)\n        s = e / (1.0 + e)", "        s = 1.0 - 1.0 / (1.0 + math.exp(a))"),
    "div: d/db without the minus": ("rules", "-a / (b * b)", "a / (b * b)"),
    "max: a tie goes to b": ("rules", "if a >= b else", "if a > b else"),
    "power: k a^k": ("rules", "(k * math.pow(a, k - 1.0),)", "(k * math.pow(a, k),)"),
    "tanh: 1 - a^2": ("rules", "(1.0 - t * t,)", "(1.0 - a * a,)"),
    "relu: gradient 1 at 0": ("rules", "if a > 0.0 else (0.0, (0.0,))", "if a > 0.0 else (0.0, (float(a == 0),))"),
    "compile: not sorted by opcode": ("compile", "(depth[id(v)], T.OPCODES[v.op])", "depth[id(v)]"),
    "compile: never scheduled": ("compile", "    if schedule:\n        depth", "    if False:\n        depth"),
    "compile: inputs before params": ("compile", "nodes = [*params, *inputs,", "nodes = [*inputs, *params,"),
    "compile: the exponent dropped": ("compile", "            arg[i] = v.arg", "            arg[i] = 0.0"),
    "compile: a listed twice is accepted": ("compile", " or id(v) in listed:", ":"),
    "chains: a partial sum read twice is fused away": ("find_chains", "if uses[i] == 1 and user[i] in prev",
                                                       "if user[i] in prev"),
    "chains: a product read twice becomes a term": ("find_chains", "opcode[i] == T.MUL and uses[i] == 1",
                                                    "opcode[i] == T.MUL"),
    "chains: nothing fused": ("find_chains", "    return chains\n", "    return {}\n"),
    "chains: a head product left out": ("find_chains", "            terms.append(p)\n            p = -1\n",
                                        "            pass\n"),
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


def test_chapter_figures(book_build):
    fig = book_figures("05-scalar-autograd")  # the book build ran the chapter top to bottom in a fresh kernel
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
