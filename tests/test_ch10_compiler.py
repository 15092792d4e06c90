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
