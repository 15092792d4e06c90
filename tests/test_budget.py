"""Readers read teenygrad's source, so it has a size budget, as tinygrad does: no module past what a
learner reads in one sitting, and the whole package stays small. Raise a number only on purpose.

The budget counts CODE lines (`code_lines`): a line holding part of a token that is not a comment or a docstring.
Explaining is what a textbook's source is for, so docstrings, comments and blank lines cost nothing."""
from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from teenygrad.edition import code_lines

from conftest import REPO

# Counted in physical lines until 2026-11-27: 11,610 in all, 460 a module (then 11,604 and 460 were used). In code
# lines the package was 2,440 under the first budget (5,000 physical: chapters 1-6); chapters 7-9 (nn, optim, the
# GPT, its fused kernels) and 10 (the compiler) took it to 6,760 (the budget 11,000 physical); then +630 for the
# compiler's later work: Adam's update fused per parameter, one cat from padded gradients, triangles.py (products
# that skip a causal mask's zeros), softmax's row buffer, schedule orders, transpose_products, causal rows and column
# blocks, the vector micro-kernel, kernel caches stamped with all kernels' source, column sums sharing a loop over
# rows, and codegen.py's split in two: 7,383 at 824daae. Then +104 for the compiler as one package, split by idea
# (schedule() in named phases, codegen in five modules, their shared names public: imports and signatures) and the map
# of old module paths that keeps a learner's older mine/ files importing: 7,487. Then +219 for exercises 1-5 at a
# course's weight (issue 34): the pieces a learner writes became launchers that compile their loops inside (the binary
# kernels, max and argmax, softmax and cross-entropy), fit_classifier, and each piece's contract: 7,706. Then +39 for
# exercise 6 (issue 35): the rules of the reductions, the views and eight elementwise ops as named functions (pieces)
# instead of one-line lambdas, and capture of a write into fresh zeros (a learner's index rule) in tg.compile: 7,745.
# Then +91 under that budget for tg.compile's refusal of a read before a write into captured zeros and exercise 7
# (issue 35: batches, lr_at, the optimizer's bookkeeping as pieces): 7,836. Then +20 for `code_lines` itself, moved
# from this file into teenygrad.edition (the capstone weighs the learner's pieces by their code lines), and +56 for
# exercise 8 (issue 35): teenygrad.text's machinery as pieces, with chapter 8's MLP language model moved into the
# package, smoothed, bigram_nll and evaluate new: 7,912. Then +6 for exercise 9 (issue 35): layer norm's backward
# kernels moved inside their piece (a launcher more, the table's entry less) and GPT.generate's piece mark: 7,918.
# Then +86 for the four exercises merged together in the next stop (issue 35): exercise 6's kernel launchers as pieces
# (tracing's dispatch kept outside them), exercise 7's layers with their size checks and Xavier's fans and gains,
# exercise 9's model functions and GELU's kernels as pieces, exercise 10's IR refusing float-only ops on integers:
# 8,013. Then +339 for chapter 11's GPU kernels (issue 36: teenygrad/kernels/cuda, a new part of the package: the
# device choice, launch configurations, elementwise kernels on strided views, reductions and the softmax, the
# SGEMM ladder, the traffic counter, the recorded results): 8,352. Then +175 for the ladder's rungs beyond 2-D blocking
# (issue 36: vectorised shared-memory loads as a flag of the blocked kernel, warp tiling and double buffering from
# one kernel factory) and the warp-shuffle row sum (GPU only, sum_rows its twin): 8,527. Then +927 for tensors on a
# GPU (issue 37): devices.py and the op layer's device dimension, and the GPU's kernel table, every op the GPT uses
# forward and backward (cuda/elementwise, reduce, movement, loss, fused, optim, the products): 9,454. Then +~180 for
# the optimizers and the clipping a group of parameters a launch on a GPU (cuda/optim.py's group kernels, the book's
# paths around `step` and `clip_grad_norm`) and counting launches by kernel: 9,6xx.
MAX_PACKAGE_LINES = 9720  # ~9,630 code lines, + ~1% headroom
MAX_MODULE_LINES = 350  # the biggest: kernels/elementwise.py 307, tape.py 287, tensor.py 276, compiler/capture/ops.py 251

# statements and their code lines: the test below checks code_lines on crafted sources made of them
PIECES = [
    ("\n", 0),  # a blank line
    ("# a comment, alone on its line\n", 0),
    ("x = 1\n", 1),
    ("x = 1  # a trailing comment\n", 1),
    ('"""A docstring (or a bare string)\nof many lines:\n\n    they explain, and cost nothing."""\n', 0),
    ("'one line of prose'\n", 0),
    ('s = """a string\nassigned to a name\n\nis data: each of its lines counts"""\n', 4),
    ("total = 1 + \\\n    2  # a line continuation\n", 2),
    ("y = max(\n    1,  # the first\n\n    2,\n)\n", 4),
    ('t = "# not a comment"\n', 1),
    ('print("a"\n      "b")\n', 2),
    ('def f(a):\n    """Its docstring,\n    of two lines."""\n    # a comment\n    return a\n', 2),
    ('class C:\n    """One line."""\n\n    n = 2\n', 2),
    ('"""prose"""; z = 3\n', 1),
]


@pytest.mark.parametrize("source, want", PIECES)
def test_code_lines_of_one_statement(source, want):
    assert code_lines(source) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12), st.booleans())
def test_code_lines_of_crafted_sources(pieces, nested):
    """Any sequence of the pieces (the first a module docstring if it is a string), at the top level or as the body
    of a function, has the sum of their code lines: never the physical lines when a piece holds prose."""
    source, want = "".join(s for s, _ in pieces), sum(n for _, n in pieces)
    if nested:
        source, want = "def g():\n" + textwrap.indent(source, "    ") + "    pass\n", want + 2
    assert code_lines(source) == want


def modules():
    return sorted((REPO / "teenygrad").rglob("*.py"))  # every subpackage too


def test_every_module_reads_in_one_sitting():
    long = {p.relative_to(REPO).as_posix(): n for p in modules() if (n := code_lines(p.read_text())) > MAX_MODULE_LINES}
    assert not long, f"over {MAX_MODULE_LINES} code lines: {long}; split the module by idea"


def test_the_package_stays_small():
    total = sum(code_lines(p.read_text()) for p in modules())
    assert total <= MAX_PACKAGE_LINES, f"teenygrad is {total} code lines, budget {MAX_PACKAGE_LINES}"
