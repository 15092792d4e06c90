"""Chapter 2's pieces: the 02-tensors judge against numpy's own strides and broadcasting, the solutions notebook
against the judge (and plausible wrong answers against it), the chapter's structure and the figures it states."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import teenygrad
from autograder.judges import judge, write_cases
from autograder.judges.tensors import (
    ERROR,
    PARTS,
    VIEWS,
    _add_on_views,
    _broadcast_shape,
    _contiguous_strides,
    _offset_of,
    _permute_view,
)
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.kernels.layout import contiguous_strides as teenygrad_strides

from conftest import book_figures

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "02-tensors.ipynb"
SOLUTIONS = REPO / "solutions" / "02-tensors.ipynb"
POINTS = {"contiguous_strides": 1, "offset_of": 1, "broadcast_shape": 1, "permute_view": 1, "add_kernel": 2}

shapes = st.lists(st.integers(0, 5), max_size=5).map(tuple)
nonempty_shapes = st.lists(st.integers(1, 5), max_size=5).map(tuple)


def element_strides(arr: np.ndarray) -> tuple[int, ...]:
    return tuple(s // arr.itemsize for s in arr.strides)


# --- the judge's references against numpy ----------------------------------------------------------------

@given(shapes)
def test_contiguous_strides_reference_is_row_major(shape):
    got = tuple(_contiguous_strides(np.array(shape, dtype=np.int64)).tolist())
    assert got == teenygrad_strides(shape)
    if 0 not in shape:  # numpy gives size-0 arrays strides of its own choosing
        assert got == element_strides(np.empty(shape))


@st.composite
def numpy_views(draw):
    """A random view of a buffer holding 0, 1, 2, ...: slices with steps (also negative), a permutation and
    maybe a broadcast axis; the value of an element is its position in the buffer."""
    shape = draw(nonempty_shapes)
    base = np.arange(int(np.prod(shape)))
    view = base.reshape(shape)
    slices = tuple(slice(draw(st.integers(0, n - 1)), None, draw(st.sampled_from([1, 2, 3, -1, -2]))) for n in shape)
    view = view[slices + (Ellipsis,)]  # with the ellipsis, even a 0-d result stays a view
    view = np.transpose(view, draw(st.permutations(range(view.ndim))))
    if draw(st.booleans()):
        view = np.broadcast_to(view, (draw(st.integers(1, 3)),) + view.shape)
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.itemsize
    return view, element_strides(view), offset


@given(numpy_views(), st.data())
def test_offset_reference_finds_numpy_elements(problem, data):
    view, strides, offset = problem
    index = tuple(data.draw(st.integers(0, n - 1)) for n in view.shape) if view.size else None
    if index is not None:
        assert int(_offset_of(np.array(index), np.array(strides), offset)) == view[index]


@given(shapes, shapes)
def test_broadcast_reference_is_numpys_rule(a, b):
    got = _broadcast_shape(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64))
    try:
        expected = np.broadcast_shapes(a, b)
    except ValueError:
        assert got is ERROR
    else:
        assert tuple(got.tolist()) == expected


@given(nonempty_shapes.flatmap(lambda s: st.tuples(st.just(s), st.permutations(range(len(s))))))
def test_permute_reference_matches_numpy_transpose(problem):
    shape, perm = problem
    arr = np.zeros(shape)[(slice(None, None, -1),) * len(shape)]  # negative strides, to be sure
    got_shape, got_strides = _permute_view(np.array(shape), np.array(element_strides(arr)), np.array(perm))
    moved = np.transpose(arr, perm)
    assert (tuple(got_shape.tolist()), tuple(got_strides.tolist())) == (moved.shape, element_strides(moved))


@pytest.mark.parametrize("seed", range(5))
def test_add_reference_matches_teenygrad_on_the_same_views(seed):
    """The judge's numpy recipes and the same recipes on teenygrad tensors (its own kernels) agree."""
    for kind, a, b in PARTS["add_kernel"].cases(np.random.default_rng(seed)):
        x, y = VIEWS[kind](teenygrad.tensor(a), teenygrad.tensor(b))
        got, want = (x + y).numpy(), _add_on_views(kind, a, b)
        assert got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=1e-12), kind


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    strides_shapes = [tuple(c[0].tolist()) for c in PARTS["contiguous_strides"].cases(rng)]
    assert () in strides_shapes and any(0 in s for s in strides_shapes) and any(1 in s for s in strides_shapes)
    offsets = PARTS["offset_of"].cases(rng)
    assert any(c[0].size == 0 for c in offsets)
    assert any((c[1] < 0).any() for c in offsets) and any((c[1] == 0).any() for c in offsets)
    broadcasts = PARTS["broadcast_shape"].cases(rng)
    results = [_broadcast_shape(*c) for c in broadcasts]
    assert sum(r is ERROR for r in results) >= 2 and sum(r is not ERROR for r in results) >= 5
    assert any(0 in c[0].tolist() + c[1].tolist() for c in broadcasts)
    permutes = PARTS["permute_view"].cases(rng)
    assert any(c[0].size == 0 for c in permutes) and any((c[1] < 0).any() for c in permutes)
    assert any((c[1] == 0).any() for c in permutes)
    kinds = [c[0] for c in PARTS["add_kernel"].cases(rng)]
    assert sorted(kinds) == sorted(VIEWS)
    for _kind, a, b in PARTS["add_kernel"].cases(rng):
        assert a.size + b.size < 200, "keep hidden inputs small: the learner's kernel may be pure Python"


# --- the solutions notebook against the judge -------------------------------------------------------------

def _cells() -> tuple[dict, dict, str]:
    nb = nbformat.read(SOLUTIONS, as_version=4)
    solutions, tests, setup = {}, {}, ""
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            solutions[meta["grade_id"]] = cell.source
        elif meta.get("grade"):
            tests[meta["grade_id"].removeprefix("test_")] = (meta["points"], cell.source)
        elif meta.get("grade_id") == "setup":
            setup = cell.source
    return solutions, tests, setup


def _hidden(source: str) -> str:
    return source[source.index("### BEGIN HIDDEN TESTS"):source.index("### END HIDDEN TESTS")]


def test_solutions_notebook_matches_the_judge():
    nb = nbformat.read(SOLUTIONS, as_version=4)
    assert nb.metadata["teenygrad"] == {"assignment": "02-tensors"}
    assert nb.cells[0].source.startswith("# Exercise 2: Strided tensors by hand")
    for cell in nb.cells:
        assert cell.cell_type == "markdown" or cell.outputs == [], "commit the solutions notebook without outputs"
    solutions, tests, setup = _cells()
    assert setup and set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, source) in tests.items():
        assert points == POINTS[part]
        assert "### BEGIN SOLUTION" in solutions[part] and "### END SOLUTION" in solutions[part]
        hidden = _hidden(source)
        assert f'report("{part}", ' in hidden and "assert" not in hidden


def test_hidden_view_recipes_are_the_judges():
    """The hidden add_kernel test builds its views with the same recipes as the judge's numpy reference."""
    judge_source = (REPO / "autograder" / "judges" / "tensors.py").read_text()
    recipe = re.compile(r"^\s*(\d+): (lambda x, y: .*?),?\s*(?:#.*)?$", re.M)
    judge_recipes = dict(recipe.findall(judge_source[judge_source.index("VIEWS = {"):]
                                        [:judge_source[judge_source.index("VIEWS = {"):].index("}")]))
    hidden = _hidden(_cells()[1]["add_kernel"][1])
    hidden_recipes = dict(recipe.findall(hidden[hidden.index("VIEWS = {"):][:hidden[hidden.index("VIEWS = {"):].index("}")]))
    assert judge_recipes and hidden_recipes == judge_recipes


def _run_hidden_tests(functions: dict, root: Path, monkeypatch) -> None:
    """Run every hidden test of the notebook, as the grader would, on the given functions."""
    monkeypatch.setenv(GRADING_DIR_ENV, str(root))
    for part, (_, source) in _cells()[1].items():
        namespace = {"np": np, "teenygrad": teenygrad, **functions}
        exec(compile(_hidden(source), f"<hidden tests of {part}>", "exec"), namespace)


def _solution_functions() -> dict:
    solutions, _, setup = _cells()
    namespace: dict = {}
    exec(compile(setup, "<setup>", "exec"), namespace)
    for part, source in solutions.items():
        exec(compile(source, f"<solution {part}>", "exec"), namespace)
    return {part: namespace[part] for part in PARTS}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch, capsys):
    drawn = write_cases(PARTS, tmp_path, seed)
    _run_hidden_tests(_solution_functions(), tmp_path, monkeypatch)
    assert judge(PARTS, drawn, tmp_path) == {part: None for part in PARTS}


def _column_major(shape):
    strides, acc = [], 1
    for n in shape:
        strides.append(acc)
        acc *= n
    return tuple(strides)


def _left_aligned(a, b):  # pads on the right instead of the left
    n = max(len(a), len(b))
    return tuple(max(x, y) for x, y in zip(a + (1,) * (n - len(a)), b + (1,) * (n - len(b))))


def _add_ignoring_strides(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    for p in range(len(out)):  # as if both operands were contiguous
        out[p] = a[a_offset + p] + b[b_offset + p] if b_offset + p < len(b) else a[p]


def _add_ignoring_offsets(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    for p in range(len(out)):
        rest, pa, pb = p, 0, 0
        for d in range(len(shape) - 1, -1, -1):
            i = rest % shape[d]
            rest //= shape[d]
            pa, pb = pa + i * a_strides[d], pb + i * b_strides[d]
        out[p] = a[pa] + b[pb]


def _add_first_axis_fastest(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
    for p in range(len(out)):  # unravels in column-major order, but writes row-major positions
        rest, pa, pb = p, a_offset, b_offset
        for d in range(len(shape)):
            i = rest % shape[d]
            rest //= shape[d]
            pa, pb = pa + i * a_strides[d], pb + i * b_strides[d]
        out[p] = a[pa] + b[pb]


WRONG = {  # plausible mistakes the judge must catch, each part on its own
    "contiguous_strides": [_column_major, lambda shape: tuple(1 for _ in shape)],
    "offset_of": [lambda index, strides, offset: sum(i * s for i, s in zip(index, strides)),
                  lambda index, strides, offset: offset + sum(index)],
    "broadcast_shape": [lambda a, b: _left_aligned(a, b),
                        lambda a, b: tuple(max(x, y) for x, y in zip((1,) * (len(b) - len(a)) + a,
                                                                     (1,) * (len(a) - len(b)) + b))],
    "permute_view": [lambda shape, strides, perm: (tuple(shape[p] for p in perm), tuple(strides)),
                     lambda shape, strides, perm: (tuple(shape[p] for p in np.argsort(perm)),
                                                   tuple(strides[p] for p in np.argsort(perm)))],
    "add_kernel": [_add_ignoring_strides, _add_ignoring_offsets, _add_first_axis_fastest],
}


@pytest.mark.parametrize("part, k", [(part, k) for part, fns in WRONG.items() for k in range(len(fns))])
def test_judge_rejects_wrong_answers(part, k, tmp_path, monkeypatch, capsys):
    functions = _solution_functions()
    functions[part] = WRONG[part][k]
    drawn = write_cases(PARTS, tmp_path, seed=7)
    _run_hidden_tests(functions, tmp_path, monkeypatch)
    verdicts = judge(PARTS, drawn, tmp_path)
    assert verdicts[part], f"the judge accepted wrong answer {k} for {part}"
    assert all(v is None for p, v in verdicts.items() if p != part), verdicts


def test_judge_accepts_either_stride_convention_for_empty_shapes(tmp_path, monkeypatch, capsys):
    functions = _solution_functions()
    functions["contiguous_strides"] = lambda shape: tuple(int(np.prod(shape[d + 1:])) for d in range(len(shape)))
    drawn = write_cases(PARTS, tmp_path, seed=3)
    _run_hidden_tests(functions, tmp_path, monkeypatch)
    assert judge(PARTS, drawn, tmp_path)["contiguous_strides"] is None


def test_judge_messages_name_the_call(tmp_path, monkeypatch, capsys):
    functions = _solution_functions()
    functions["broadcast_shape"] = _left_aligned  # never raises
    drawn = write_cases(PARTS, tmp_path, seed=0)
    _run_hidden_tests(functions, tmp_path, monkeypatch)
    verdict = judge(PARTS, drawn, tmp_path)["broadcast_shape"]
    assert "broadcast_shape((" in verdict


# --- the chapter -------------------------------------------------------------------------------------------

# The chapter's structure (title, headings, no outputs, exercise link): tests/test_notebooks.py



def _nested_list_memory(n: int = 500) -> tuple[float, float]:
    """Bytes per number of an n x n matrix as nested lists of floats, and the ratio to 8-byte float64s."""
    nested = [[float(i * n + j) for j in range(n)] for i in range(n)]
    total = sys.getsizeof(nested) + sum(sys.getsizeof(r) + sum(sys.getsizeof(x) for x in r) for r in nested)
    return total / n**2, total / (8 * n**2)


def test_figures_stated_in_the_prose():
    per_number, ratio = _nested_list_memory()
    # "about 32 bytes per number ... 24 for the float object, 8 for the pointer"
    assert sys.getsizeof(1.5) == 24 and round(per_number) == 32
    assert 3.9 < ratio < 4.2  # "4.1 times", "about four times the memory"


def test_chapter_figures_from_the_build(book_build):
    """The figures the chapter glued into its text, read back from the book build's executed notebook."""
    fig = book_figures("02-tensors")
    per_number, ratio = _nested_list_memory()
    assert fig["ch2_nested_bytes_per_number"] == pytest.approx(per_number, rel=1e-9)
    assert fig["ch2_nested_memory_ratio"] == pytest.approx(ratio, rel=1e-9)
    assert round(fig["ch2_nested_bytes_per_number"]) == 32 and f"{fig['ch2_nested_memory_ratio']:.1f}" == "4.1"
