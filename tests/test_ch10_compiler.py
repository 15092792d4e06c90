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
          "ch10_compiled_ratio", "ch10_val_loss", "ch10_train_minutes", "ch10_train_ms_per_step", "ch10_traces",
          "ch10_chapter_minutes", "ch10_shared_reads", "ch10_gpt_products", "ch10_gpt_causal_products"}


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
    ch9 = book_figures("09-gpt")
    assert set(fig) >= STATED
    assert fig["ch10_cse_after"] < fig["ch10_cse_before"]                  # CSE found duplicates
    assert fig["ch10_softmax_kernels"] == 1 and fig["ch10_linear_kernels"] == 1  # "is 1 kernel"
    # "the compiler keeps in registers much of what the composed version sends through memory"
    assert fig["ch10_gpt_compiled_kernels"] < fig["ch10_gpt_composed_kernels"]
    assert fig["ch10_gpt_compiled_mb"] < 0.6 * fig["ch10_gpt_composed_mb"]
    # "the hand-written kernels still move less memory"
    assert fig["ch10_gpt_eager_mb"] < fig["ch10_gpt_compiled_mb"]
    assert fig["ch10_compiled_ratio"] == pytest.approx(fig["ch10_compiled_ms"] / fig["ch10_eager_ms"], rel=1e-6)
    for name in ("ch10_gpt_first_call", "ch10_eager_ms", "ch10_compiled_ms", "ch10_train_minutes",
                 "ch10_train_ms_per_step", "ch10_chapter_minutes"):
        assert fig[name] > 0, name                                         # timings: only that they were measured
    assert fig["ch10_shared_reads"] == passes.SHARED_READS                 # "reads more than 3 arrays"
    # "... of the step's ... matrix products skip those micro-tiles": S, dP, P v, P^T g, dS k and (computed
    # transposed, passes.transpose_products) dk = dS^T q in each of the 4 layers
    assert fig["ch10_gpt_causal_products"] == 6 * 4 < fig["ch10_gpt_products"]
    assert fig["ch10_traces"] == 2                                         # "traced 2 times"
    # the compiled run trains as chapter 9's eager run of the same recipe, weights and batches does
    assert fig["ch10_val_loss"] <= 1.9
    assert fig["ch10_val_loss"] == pytest.approx(ch9["ch9_shakespeare_val_loss"], abs=0.05)


# ---- exercise 10's judge ------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import teenygrad as tg  # noqa: E402
from autograder.judges import compiler as judge  # noqa: E402
from teenygrad.grading import PROGRAM_OPS, random_program  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.lists(st.integers(0, len(PROGRAM_OPS) - 1), min_size=1, max_size=6),
       st.integers(0, 2**31))
def test_the_judges_numpy_programs_are_teenygrads(n, codes, seed):
    """The judge's oracle (numpy) computes what grading.random_program computes in eager teenygrad."""
    rng = np.random.default_rng(seed)
    x, row = rng.standard_normal((n, n)), rng.standard_normal(n)
    want = random_program(tg.tensor(x), tg.tensor(row), codes).numpy()
    np.testing.assert_allclose(judge.program(x, row, np.array(codes)), want, rtol=1e-12, atol=1e-12)


def test_the_judge_accepts_right_answers_and_rejects_wrong_ones():
    rng = np.random.default_rng(0)
    for case in judge.PARTS["index_expr"].cases(rng):
        if len(case) == 3:
            shape, strides, offset = case
            right = offset + (np.indices(tuple(shape)).reshape(len(shape), -1) * strides[:, None]).sum(0)
            assert judge._check_index(case, (right,)) is None
            if right.size > 1 and np.any(strides[np.asarray(shape) > 1]):
                assert judge._check_index(case, (right[::-1].copy(),)) is not None or np.array_equal(right, right[::-1])
            assert judge._check_index(case, (right + 1,)) is not None
        else:
            x, row, codes, bits = case
            right = judge.program(x, row, codes)
            assert judge._check_index(case, (right,)) is None
            assert judge._check_index(case, (right.T.copy() + 1e-3,)) is not None
    for case in judge.PARTS["cse"].cases(rng):
        right = judge.program(*case[:3])
        assert judge._check_cse(case, (right, 40, 30)) is None
        assert "nothing was merged" in judge._check_cse(case, (right, 40, 40))
        assert judge._check_cse(case, (right * 1.01 + 0.01, 40, 30)) is not None
    for case in judge.PARTS["fold_constants"].cases(rng):
        right = judge.program(*case[:3])
        assert judge._check_fold(case, (right, 40, 30, 0)) is None
        assert "still have only constants" in judge._check_fold(case, (right, 40, 30, 2))
        assert judge._check_fold(case, (right, 40, 40, 0)) is not None
        assert judge._check_fold(case, (right + 0.5, 40, 30, 0)) is not None
