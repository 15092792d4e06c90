"""Chapter 2's pieces: teenygrad's coalesce, parse_key and index_view, view_strides and the copy kernel against
numpy and brute force, the 02-tensors judge against the solutions notebook (and plausible wrong answers against it),
the solutions' distance from the chapter's code, and the figures the chapter states."""
from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import teenygrad as tg
from autograder.judges.tensors import PARTS, _positions, _reachable
from teenygrad.compiler.capture.views import index_plan
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.kernels import movement
from teenygrad.kernels.jit import JIT_ENABLED
from teenygrad.kernels.layout import coalesce, view_strides
from teenygrad.tensor_views import index_view, parse_key

from conftest import book_figures, notebook_namespace, replacing, run_hidden, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "02-tensors.ipynb"
SOLUTIONS = REPO / "solutions" / "02-tensors.ipynb"
POINTS = {"coalesce": 2, "indexing": 3, "view_strides": 3, "copy": 2}


def element_strides(arr: np.ndarray) -> tuple[int, ...]:
    return tuple(s // arr.itemsize for s in arr.strides)


@st.composite
def numpy_views(draw, min_side=1):
    """A numpy view of arange: a random shape, permuted, with stepped, reversed and broadcast axes."""
    shape = tuple(draw(st.lists(st.integers(min_side, 4), min_size=0, max_size=4)))
    base = np.arange(max(int(np.prod([2 * n for n in shape])), 1) * 2)
    x = base[:int(np.prod([2 * n for n in shape]))].reshape(tuple(2 * n for n in shape)) if shape else base[:1].reshape(())
    if shape:
        x = x[tuple(slice(None, None, draw(st.sampled_from([2, -2]))) for _ in shape)]
        x = x.transpose(draw(st.permutations(range(len(shape)))))
    if shape and draw(st.booleans()):
        d = draw(st.integers(0, len(shape) - 1))
        x = np.broadcast_to(x[tuple(slice(0, 1) if e == d else slice(None) for e in range(len(shape)))], x.shape)
    return x, base


def _layout(view, base):
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // base.itemsize
    return view.shape, element_strides(view), offset


# --- teenygrad's pieces ------------------------------------------------------------------------------------------

@settings(deadline=None, max_examples=80)
@given(numpy_views(), numpy_views())
def test_coalesce_keeps_every_operands_walk(a, b):
    (x, _), (y, _) = a, b
    if x.ndim != y.ndim or x.shape != y.shape:
        y = np.broadcast_to(np.zeros(()), x.shape)
    shape, (sx, sy) = coalesce(x.shape, element_strides(x), element_strides(y))
    assert len(shape) >= 1 and 1 not in shape[1:] and (shape == (1,) or 1 not in shape)
    assert list(_positions(shape, sx)) == list(_positions(x.shape, element_strides(x)))
    assert list(_positions(shape, sy)) == list(_positions(y.shape, element_strides(y)))
    for d in range(len(shape) - 1):  # merged as far as the rule allows
        assert sx[d] != sx[d + 1] * shape[d + 1] or sy[d] != sy[d + 1] * shape[d + 1]


@settings(deadline=None, max_examples=150)
@given(numpy_views(min_side=0), st.data())
def test_index_view_is_numpys_view(problem, data):
    x, base = problem
    items = st.one_of(st.integers(-5, 5), st.none(), st.just(Ellipsis),
                      st.builds(slice, st.one_of(st.none(), st.integers(-6, 6)), st.one_of(st.none(), st.integers(-6, 6)),
                                st.one_of(st.none(), st.integers(-3, 3).filter(bool))))
    key = tuple(data.draw(st.lists(items, max_size=5)))
    try:
        want = x[key + ((Ellipsis,) if Ellipsis not in key else ())]
    except IndexError:
        with pytest.raises(IndexError):
            index_view(*_layout(x, base), key)
        return
    got = index_view(*_layout(x, base), key)
    assert got[0] == want.shape
    if want.size:
        assert got == _layout(want, base)
    # the compiler's lazy plan reads the same parser: its slices of x pick numpy's elements
    spec, shape = index_plan(x.shape, key)
    assert len(spec) == x.ndim and len(parse_key(x.shape, key)) >= x.ndim and shape == want.shape
    picked = x[np.ix_(*(np.arange(*s) for s in spec))] if x.ndim else x
    assert np.array_equal(picked.reshape(shape), want)


def test_parse_key_spells_out_every_axis_and_refuses_what_numpy_refuses():
    assert parse_key((4, 5, 6), (1, Ellipsis, None)) == [1, (0, 5, 1), (0, 6, 1), None]
    assert parse_key((4, 5), (np.int64(-1),)) == [3, (0, 5, 1)]
    assert parse_key((), (None,)) == [None]
    with pytest.raises(TypeError, match="unsupported index"):
        parse_key((4,), (1.5,))
    for key in [(4,), (0, 0), (Ellipsis, Ellipsis)]:
        with pytest.raises(IndexError):
            parse_key((4,), key)


@settings(deadline=None, max_examples=150)
@given(numpy_views(min_side=0), st.data())
def test_view_strides_exists_exactly_when_brute_force_finds_strides(problem, data):
    x, base = problem
    shape, strides, offset = _layout(x, base)
    n = x.size
    new = tuple(data.draw(st.lists(st.integers(1, 6), max_size=4)))
    if n == 0:
        new = new + (0,)
    elif int(np.prod(new)) != n:
        new = (n,) if data.draw(st.booleans()) else (*new[:0], n // 1)
    got = view_strides(shape, strides, new)
    positions = _positions(shape, strides, offset)
    if _reachable(positions, new):
        assert got is not None
        if n > 1:
            assert list(_positions(new, got, offset)) == list(positions)
    else:
        assert got is None


@settings(deadline=None, max_examples=120)
@given(numpy_views(), st.lists(st.sampled_from([1, 2, -1, -2]), min_size=4, max_size=4),
       st.sampled_from([np.float64, np.float32, np.int64]))
def test_the_copy_kernel_writes_exactly_the_destinations_elements(problem, steps, dtype):
    x, xbase = problem  # any view: permuted, stepped, reversed, broadcast
    out = np.arange(-1, -1 - 2 ** x.ndim * max(x.size, 1), -1).astype(dtype)  # the destination's buffer

    def destination(buf):  # a stepped, maybe reversed view of x's shape in the middle of buf
        if not x.ndim:
            return buf.reshape(())
        wide = buf.reshape(tuple(2 * n for n in x.shape))
        return wide[tuple(slice(None, None, s) for s in steps[:x.ndim])][tuple(slice(0, n) for n in x.shape)]

    want = out.copy()
    destination(want)[...] = x  # numpy's copy, with its cast
    shape, src_strides, src_offset = _layout(x, xbase)
    _, dst_strides, dst_offset = _layout(destination(out), out)
    if not shape:  # the kernel's convention: at least one dimension
        shape, src_strides, dst_strides = (1,), (0,), (0,)
    ints = lambda values: np.array(values, dtype=np.int64)  # noqa: E731
    movement.copy(ints(shape), xbase, ints(src_strides), src_offset, out, ints(dst_strides), dst_offset)
    assert np.array_equal(out, want)


def test_tensor_view_and_reshape_use_view_strides():
    t = tg.tensor(np.arange(24.0).reshape(2, 3, 4))
    v = t.T.view(2, 2, 3, 2)
    assert v.strides == view_strides(t.T.shape, t.T.strides, (2, 2, 3, 2))
    with pytest.raises(ValueError, match="not compatible"):
        t.T.view(24)
    assert np.array_equal(t.T.reshape(24).numpy(), np.arange(24.0).reshape(2, 3, 4).T.reshape(24))


# --- the judge against the solutions notebook --------------------------------------------------------------------

def _kernel_without_cache(fn=None, **options):
    """teenygrad.kernels.kernel without the disk cache, which needs a source file (exec'd cells have none), and
    with bounds checks: a wrong kernel below writes outside its buffer, which must raise, not corrupt memory."""
    wrap = numba.njit(boundscheck=True, **options) if JIT_ENABLED else (lambda f: f)
    return wrap(fn) if fn is not None else wrap


def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    """The solutions notebook's definitions, with numba's disk cache off for part 4's kernel."""
    return notebook_namespace(SOLUTIONS, transform, after_exec=lambda ns: ns.__setitem__("kernel", _kernel_without_cache))


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
    """The hidden tests, with the notebook's functions installed in teenygrad (as its test cells do first)."""
    with contextlib.ExitStack() as stack:
        for part, pieces in tg.edition.parts("02-tensors").items():
            fns = [namespace[p.name] for p in pieces if not p.kernel]
            stack.enter_context(tg.edition.installed("02-tensors", part, *fns))
        return run_hidden(PARTS, namespace, hidden, parts, tmp_path, seed)


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        assert "tg.Tensor._make(" in hidden  # views built from the judge's layouts, not with another part's piece


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert _run_hidden(namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "coalesce merges without checking every operand": ("coalesce", "if all(ns[-1] == st[d] * n", "if any(ns[-1] == st[d] * n"),
    "coalesce keeps size-1 dims": ("coalesce", "dims = [d for d, n in enumerate(shape) if n != 1]",
                                   "dims = list(range(len(shape)))"),
    "coalesce never merges": ("coalesce", "new_shape[-1] *= n", "raise ValueError"),
    "index ignores negative ints": ("indexing", "entries.append(i + size if i < 0 else i)", "entries.append(i)"),
    "index without bounds check": ("indexing", "if i < -size or i >= size:", "if False:"),
    "index: Ellipsis takes every axis": ("indexing", "for _ in range(len(shape) - len(taking)):",
                                         "for _ in range(len(shape) - axis):"),
    "parse_key forgets the axes after the key": ("indexing", "return entries + [(0, n, 1) for n in shape[axis:]]",
                                                 "return entries"),
    "view merges without the contiguity check": ("view_strides", "                    return None", "                    pass"),
    "view uses the outer stride": ("view_strides", "stride = old[o][1]  #", "stride = old[o - (d - first > 1)][1]  #"),
    "copy ignores the source's offset": ("copy", "read, write, rest = src_offset, dst_offset, r",
                                         "read, write, rest = 0, dst_offset, r"),
    "copy moves along the destination's rows with the source's strides": ("copy", "write += digit * dst_strides[d]",
                                                                         "write += digit * src_strides[d]"),
    "copy forgets the rows' digits past the first": ("copy", "rest //= shape[d]", "rest = 0"),
    "copy writes the destination contiguously": ("copy", "dst[write + j * dst_strides[last]]",
                                                 "dst[r * shape[last] + j]"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, tmp_path, monkeypatch):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(replacing(part, old, new))
    assert _run_hidden(namespace, hidden, [part], tmp_path, seed=5)[part] is not None, mistake


# The solutions do not repeat the chapter's code: tests/test_notebooks.py
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
