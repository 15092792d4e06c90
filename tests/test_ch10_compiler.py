"""Chapter 10 (the compiler): every figure its prose states is glued by its code, and the book build's figures
hold what the prose says about them. The compiler itself is tested in test_ch10_capture.py and test_ch10_codegen.py."""
from __future__ import annotations

import re

import nbformat
import numpy as np
import pytest

from teenygrad.compiler import passes

from conftest import REPO, book_figures

CHAPTER = REPO / "chapters" / "10-compiler.ipynb"
STATED = {"ch10_cse_before", "ch10_cse_after", "ch10_softmax_kernels", "ch10_linear_kernels", "ch10_gpt_first_call",
          "ch10_gpt_composed_kernels", "ch10_gpt_composed_mb", "ch10_gpt_eager_kernels", "ch10_gpt_eager_mb",
          "ch10_gpt_compiled_kernels", "ch10_gpt_compiled_mb", "ch10_eager_ms", "ch10_compiled_ms",
          "ch10_compiled_ratio", "ch10_schedule_steps", "ch10_twin_steps", "ch10_twin_first_loss",
          "ch10_twin_last_loss", "ch10_twin_half_max_diff", "ch10_twin_max_diff", "ch10_train_ms_per_step",
          "ch10_eager_train_ms_per_step", "ch10_traces", "ch10_chapter_minutes", "ch10_shared_reads",
          "ch10_gpt_products", "ch10_gpt_causal_products"}


def test_every_figure_in_the_prose_is_glued_by_the_code():
    nb = nbformat.read(CHAPTER, as_version=4)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "".join(c.source for c in nb.cells if c.cell_type == "code")
    used = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)", prose))
    glued = set(re.findall(r'glue\("([a-z0-9_]+)"', code))
    assert used == STATED and used <= glued
    assert "benchmarks/compile.py" in prose and "../exercises/10-compiler.ipynb" in prose


def test_full_run_figures(book_build):
    """What the prose says about the figures the book build measured."""
    fig = book_figures("10-compiler")
    assert set(fig) >= STATED
    assert fig["ch10_cse_after"] < fig["ch10_cse_before"]                  # CSE found duplicates
    assert fig["ch10_softmax_kernels"] == 1 and fig["ch10_linear_kernels"] == 1  # "is 1 kernel"
    # "the compiler keeps in registers much of what the composed version sends through memory"
    assert fig["ch10_gpt_compiled_kernels"] < fig["ch10_gpt_composed_kernels"]
    assert fig["ch10_gpt_compiled_mb"] < 0.6 * fig["ch10_gpt_composed_mb"]
    # "the hand-written kernels still move less memory"
    assert fig["ch10_gpt_eager_mb"] < fig["ch10_gpt_compiled_mb"]
    assert fig["ch10_compiled_ratio"] == pytest.approx(fig["ch10_compiled_ms"] / fig["ch10_eager_ms"], rel=1e-6)
    for name in ("ch10_gpt_first_call", "ch10_eager_ms", "ch10_compiled_ms", "ch10_train_ms_per_step",
                 "ch10_eager_train_ms_per_step", "ch10_chapter_minutes"):
        assert fig[name] > 0, name                                         # timings: only that they were measured
    assert fig["ch10_shared_reads"] == passes.SHARED_READS                 # "reads more than 3 arrays"
    # "... of the step's ... matrix products skip those micro-tiles": S, dP, P v, P^T g, dS k and (computed
    # transposed, passes.transpose_products) dk = dS^T q in each of the 4 layers
    assert fig["ch10_gpt_causal_products"] == 6 * 4 < fig["ch10_gpt_products"]
    assert fig["ch10_traces"] == 2                                         # "traced 2 times"
    # the first steps of chapter 9's run, eager and compiled from the same weights on the same batches
    assert fig["ch10_schedule_steps"] == 2000 and 0 < fig["ch10_twin_steps"] < fig["ch10_schedule_steps"]
    assert fig["ch10_twin_first_loss"] == pytest.approx(np.log(65), abs=0.2)  # "about what guessing uniformly gives"
    assert fig["ch10_twin_last_loss"] < 2.6                                # it trains (measured 2.44 at 300 steps)
    # "over the first half ... the last bits of a float32": one rounding step of a float32 is 4.8e-7 between 4 and
    # 8 (the first loss, 4.25), 2.4e-7 between 2 and 4; measured 4.8e-7. The bound is 4 such steps at 4.25.
    assert fig["ch10_twin_half_max_diff"] <= 4 * float(np.spacing(np.float32(4.25)))
    # "the differences grow ... far below the loss's noise from one batch to the next" (about 0.05): rounding
    # differences that training amplifies, measured 3.4e-5 after 300 steps (growing some 70 times per 100 steps
    # once past the loss's own rounding, in float32 and, a billion times smaller, in float64 alike). A real mistake
    # is tenths: a learning rate frozen at the trace's first value puts the runs 0.16 apart within 5 steps.
    assert fig["ch10_twin_max_diff"] < 1e-3


# ---- exercise 10's judge ------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import teenygrad as tg  # noqa: E402
from autograder.judges import compiler as judge  # noqa: E402
from teenygrad.grading import PROGRAM_OPS, random_program  # noqa: E402

from conftest import notebook_namespace, replacing, run_hidden, solution_cells  # noqa: E402
from installing import pieces_from  # noqa: E402

ASSIGNMENT = "10-compiler"
SOLUTIONS = REPO / "solutions" / "10-compiler.ipynb"
POINTS = {"index_expr": 2, "fold_constants": 3, "merge_cats": 3, "transpose_products": 3, "emit": 5, "fusion": 6,
          "columns": 5}
BUILDERS = ("fusion_graph", "items_of", "kernel_of", "cat_sum", "products", "expression", "column_graph", "steps_of")


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.lists(st.integers(0, len(PROGRAM_OPS) - 1), min_size=1, max_size=6),
       st.integers(0, 2**31))
def test_the_judges_numpy_programs_are_teenygrads(n, codes, seed):
    """The judge's oracle (numpy) computes what grading.random_program computes in eager teenygrad."""
    rng = np.random.default_rng(seed)
    x, row = rng.standard_normal((n, n)), rng.standard_normal(n)
    want = random_program(tg.tensor(x), tg.tensor(row), codes).numpy()
    np.testing.assert_allclose(judge.program(x, row, np.array(codes)), want, rtol=1e-12, atol=1e-12)


def test_the_notebooks_builders_are_the_judges():
    """The hidden tests rebuild each case's graph with the first cell's builders; the judge with its copies."""
    import inspect
    for path in (SOLUTIONS, REPO / "exercises" / "10-compiler.ipynb"):
        setup = next(c.source for c in nbformat.read(path, as_version=4).cells
                     if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
        for name in BUILDERS:
            assert inspect.getsource(getattr(judge, name)).rstrip() in setup, (path.name, name)
    assert judge.EXPR_OPS == notebook_namespace(SOLUTIONS)[0]["EXPR_OPS"]


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(judge.PARTS) == set(POINTS)
    for part, (points, _) in tests.items():
        assert points == POINTS[part]


@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, grading_dir, capsys):
    namespace, hidden = notebook_namespace(SOLUTIONS)
    with pieces_from(namespace, ASSIGNMENT):
        verdicts = run_hidden(judge.PARTS, namespace, hidden, judge.PARTS, grading_dir, seed)
    assert verdicts == {part: None for part in judge.PARTS}


def test_the_emit_cases_cover_every_op_and_dtype():
    rng = np.random.default_rng(0)
    cases = [c for _ in range(5) for c in judge.PARTS["emit"].cases(rng)]
    ops = {judge.EXPR_OPS[int(r[0])] for c in cases for r in np.atleast_2d(c[2])}
    assert ops == set(judge.EXPR_OPS)
    kinds = {int(v[0]) for c in cases for v in np.atleast_2d(c[1])}
    assert kinds == {0, 1, 2, 3}                                   # buffers, an arange, a register
    roots = {judge.expression(*c)[0].dtype for c in cases}
    assert roots == {"float32", "float64", "int64", "bool"}


def test_the_fusion_cases_fuse_and_do_not():
    """Each kind of fusion case has items that fuse and items that do not (with the package's rules)."""
    rng = np.random.default_rng(0)
    joined, apart = set(), set()
    for case in judge.PARTS["fusion"].cases(rng):
        items, targets = judge.items_of(judge.fusion_graph(*case))
        where = judge.kernel_of(items, judge.fusion.fuse(items, targets))
        (joined if len(set(where)) < len(where) else apart).add(int(case[0]))
        if len(set(where)) > 1:
            apart.add(int(case[0]))
    assert joined == apart == {0, 1, 2}


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "index_expr keeps a broadcast axis's stride": ("index_expr", "if stride != 0 and view.shape[d] != 1:",
                                                   "if view.shape[d] != 1:"),
    "index_expr without the offset": ("index_expr", "terms = [str(view.offset)] if view.offset else []", "terms = []"),
    "folding leaves movements of constants": ("fold_constants", "if n.op in ir.MOVEMENT:", "if False:"),
    "merge_cats merges overlapping pieces": ("merge_cats", "            if start < end:\n", "            if False:\n"),
    "merge_cats drops the zeros at the end": ("merge_cats", "        if end < n.shape[axis]:", "        if False:"),
    "merge_cats leaves every add": ("merge_cats", "        return ir.cat(pieces, axis)", "        return passes._same(n, srcs)"),
    "transpose_products flips with a plain reader": (
        "transpose_products", "return all(r.op == \"permute\" and r.arg[-2:] == (rank - 1, rank - 2) for r in readers[id(mm)])",
        "return any(r.op == \"permute\" and r.arg[-2:] == (rank - 1, rank - 2) for r in readers[id(mm)])"),
    "transpose_products flips 2-d products": ("transpose_products", "rank < 3", "rank < 2"),
    "transpose_products reads the flip untransposed": ("transpose_products", "tuple(swap[axis] for axis in n.arg)",
                                                       "n.arg"),
    "transpose_products forgets to swap the operands": (
        "transpose_products", "ir.matmul(ir.permute(b, swap), ir.permute(a, swap))",
        "ir.permute(ir.matmul(a, b), swap)"),
    "emit divides int64s as floats": ("emit", "f\"np.int64({a[0]} / {a[1]})\" if n.dtype == \"int64\" else ", ""),
    "emit writes Python floats": ("emit", "        return src.const(n.arg, n.dtype)", "        return repr(n.arg)"),
    "emit casts to bool as an int": ("emit", "f\"{a[0]} != 0\" if n.dtype == \"bool\" else ", ""),
    "emit swaps where's branches": ("emit", "f\"{a[1]} if {a[0]} else {a[2]}\"", "f\"{a[2]} if {a[0]} else {a[1]}\""),
    "emit reads a register from memory": ("emit", "        if id(base) in self.local:", "        if False:"),
    "emit's recip in float64": ("emit", "src.const(1.0, n.dtype)", "src.const(1.0, 'float64')"),
    "emit's float32 exp unguarded": ("emit", "{e} if {lo} < {a[0]} < {hi} else ", "{e} if True else "),
    "fusion's row view checks no strides": (
        "fusion", "if d in inner and stride != 0 or d not in inner and stride != row_major[d] and shape[d] != 1:",
        "if False:"),
    "fusion joins a reduction of other rows": ("fusion", " or it.node.op in ir.REDUCE and it.inner != k.inner", ""),
    "fusion ignores what a stage assigns": ("fusion", "    if assigned & buffers_read(it) or", "    if False and"),
    "fusion without a cap on stages": ("fusion", "    if len(k.items) >= fusion.SIDE_BY_SIDE:", "    if False:"),
    "fusion's epilogue not reshaped": ("fusion", "    expr = it.expr if it.shape == k.shape else passes.reshape_expr(it.expr, k.shape)",
                                       "    expr = it.expr if it.shape == k.shape else None"),
    "fusion gives a product two epilogues": ("fusion", "if len(k.items) > 1 or it.node.op", "if it.node.op"),
    "fusion follows loops of other shapes": ("fusion", "    return aligned(k, it, [v for v in it.leaves",
                                             "    return True or aligned(k, it, [v for v in it.leaves"),
    "columns: one band's rows for every chunk": ("columns", "my_rows = f\"{rows}\" if blocks > 1 else ",
                                                "my_rows = "),
    "columns: partials of every band at 0": ("columns", "p0[ch * {n_outer} + o] = acc[o]", "p0[o] = acc[o]"),
    "columns: a max that starts at 0": ("columns", "{init_value(n)}, {acc_dtype}", "0, {acc_dtype}"),
    "columns: serial, but run told to share it": ("columns", "return args, blocks, blocks if blocks > 1 else 0",
                                                  "return args, blocks, blocks"),
    "columns: the stages' partials overlap": ("columns", "start = max(stage, 0) * bands * n_outer", "start = 0"),
    "columns: combine forgets the first band": ("columns", "for band in range(1, {bands}):",
                                                "for band in range(2, {bands}):"),
    "columns: a max combined as a sum": ("columns", "if n.op == \"sum\" else f\"    acc = max(acc, {partial})\"",
                                         "if True else \"\""),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, grading_dir, capsys):
    part, old, new = WRONG[mistake]
    namespace, hidden = notebook_namespace(SOLUTIONS, replacing(part, old, new))
    with pieces_from(namespace, ASSIGNMENT, [part]):
        verdicts = run_hidden(judge.PARTS, namespace, hidden, [part], grading_dir, seed=5)
    assert verdicts[part] is not None, mistake
