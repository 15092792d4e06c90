"""Judge for assignment 02-tensors: views, the arithmetic teenygrad runs on (exercises/02-tensors.ipynb).

The learner writes four pieces of teenygrad (`@exercise`): `coalesce` and `view_strides` in
`teenygrad/kernels/layout.py`, `parse_key` and `index_view` (the part `indexing`) in `teenygrad/tensor_views.py`,
and the strided `copy` kernel in `teenygrad/kernels/movement.py`. Each hidden test installs the learner's
function and runs teenygrad on it, on tensors the hidden cell builds straight from a layout the judge draws
(`Tensor._make(buffer, shape, strides, offset)`): no other piece of this exercise is used to build them, and the
one the copy's launcher calls (`coalesce`) is the hidden cell's own stand-in, so each part scores on its own.
The layouts include size-0 and size-1 dimensions, negative strides and stride 0. References are numpy on the
same layouts (`np.lib.stride_tricks.as_strided`) and plain Python written from the definitions:

* `coalesce`: the coalesced shape and strides are unique (drop size-1 dims, merge neighbours while every
  operand allows it), so they are compared exactly; and an add and a multiply of two views through teenygrad,
  whose elementwise kernels run on the learner's coalescing, against numpy.
* `indexing`: the view `t[key]` (shape, strides, offset and values) against numpy's view of the same key, and
  the compiler's lazy plan of the same key (`capture.views.index_plan`, which reads the learner's `parse_key`):
  its slices, taken from the buffer positions of t's elements, must pick numpy's elements in numpy's order. A
  key numpy refuses with IndexError must raise IndexError on both paths (reported as [-1]).
* `view_strides`: `t.view(new_shape)`. Whether a view exists is decided here by brute force from the
  elements' buffer positions (a reshape is a view exactly when some strides read the same positions in the
  same order), so the judge does not trust teenygrad's own rule; when one exists, the learner's strides must
  read exactly those positions (strides of size-1 axes are free), else `view` must refuse (reported as [-1]).
* `copy`: a strided view written into another strided view of a float64 buffer (`copy_into`, the source
  broadcast when its shape is smaller), its `contiguous()` copy and its cast to float32, all through the
  learner's kernel: the whole destination buffer must be numpy's (the elements outside the view untouched).
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

NONE = -(2**62)  # a missing slice bound, as the hidden cell decodes it


def _ints(values) -> np.ndarray:
    return np.array(list(values), dtype=np.int64).reshape(-1)


def _contiguous(shape) -> list[int]:
    strides, acc = [], 1
    for n in reversed(list(shape)):
        strides.append(acc)
        acc *= max(int(n), 1)
    return strides[::-1]


def _positions(shape, strides, offset=0) -> np.ndarray:
    """The buffer position of every element, in row-major order of `shape` (a flat int64 array)."""
    shape = tuple(int(n) for n in shape)
    if not shape:
        return np.array([int(offset)], dtype=np.int64)
    idx = np.indices(shape).reshape(len(shape), -1)
    return int(offset) + (np.asarray(strides, dtype=np.int64).reshape(-1, 1) * idx).sum(axis=0)


def _view(buf: np.ndarray, shape, strides, offset) -> np.ndarray:
    """The elements of a layout over `buf`, as a numpy array (the oracle's copy of what the hidden cell views)."""
    shape = tuple(int(n) for n in shape)
    if 0 in shape:
        return np.empty(shape, buf.dtype)
    return buf[_positions(shape, strides, offset)].reshape(shape)


def _layout(rng: np.random.Generator, shape: tuple[int, ...], kinds: str = "rpbs") -> tuple:
    """A buffer and a random strided layout of `shape` over it: permuted (p), reversed (r), broadcast (b),
    stepped (s) axes, as transposes, slices and expands make them. Returns (buf, shape, strides, offset)."""
    ndim = len(shape)
    steps = [int(rng.choice([1, 2])) if "s" in kinds else 1 for _ in shape]
    base = [max(n, 1) * st for n, st in zip(shape, steps)]
    order = rng.permutation(ndim) if "p" in kinds and ndim else np.arange(ndim)
    inner = [base[d] for d in order]
    raw = _contiguous(inner)
    strides = [0] * ndim
    for pos, d in enumerate(order):
        strides[d] = raw[pos] * steps[d]
    offset = 0
    for d in range(ndim):
        if "b" in kinds and shape[d] > 1 and rng.random() < 0.2:
            strides[d] = 0
        elif "r" in kinds and rng.random() < 0.35 and shape[d] > 0:
            offset += (shape[d] - 1) * strides[d]
            strides[d] = -strides[d]
    size = int(np.prod(inner)) if inner else 1
    buf = rng.normal(size=size + 3)
    return buf, _ints(shape), _ints(strides), offset


# ---- coalesce ---------------------------------------------------------------------------------------------

def _coalesce(shape, *strides) -> tuple[list[int], list[list[int]]]:
    dims = [d for d, n in enumerate(shape) if n != 1]
    if not dims:
        return [1], [[0] for _ in strides]
    new_shape, new_strides = [shape[dims[0]]], [[st[dims[0]]] for st in strides]
    for d in dims[1:]:
        if all(ns[-1] == st[d] * shape[d] for ns, st in zip(new_strides, strides)):
            new_shape[-1] *= shape[d]
            for ns, st in zip(new_strides, strides):
                ns[-1] = st[d]
        else:
            new_shape.append(shape[d])
            for ns, st in zip(new_strides, strides):
                ns.append(st[d])
    return new_shape, new_strides


def _coalesce_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    shapes = [(1,), (1, 1), (7,), (2, 3, 4), (3, 1, 4), (2, 1, 3, 1), (4, 3, 5), (2, 2, 2, 2, 3), (5, 6)]
    for shape in shapes:
        a = _layout(rng, shape)
        b = _layout(rng, shape, "rpb")
        strides = np.stack([a[2], b[2], _ints(_contiguous(shape))])
        cases.append((_ints(shape), strides, *a, *b))
    return cases


def _check_coalesce(case: Case, got: tuple) -> str | None:
    shape, strides, a, a_shape, a_strides, a_offset, b, b_shape, b_strides, b_offset = case
    operands = ", ".join(str(tuple(int(s) for s in st)) for st in strides)
    call = f"coalesce({tuple(int(n) for n in shape)}, {operands})"
    if len(got) != 4:
        return f"reported {len(got)} values, expected 4"
    want_shape, want_strides = _coalesce([int(n) for n in shape], *([int(s) for s in st] for st in strides))
    got_shape, got_strides = np.asarray(got[0]).reshape(-1), np.asarray(got[1])
    if list(got_shape) != want_shape or got_strides.shape != (len(strides), len(want_shape)):
        return f"{call} returned shape {tuple(got_shape.tolist())}, expected {tuple(want_shape)}"
    if want_shape != [1] and got_strides.tolist() != want_strides:
        return f"{call} returned strides {got_strides.tolist()}, expected {want_strides}"
    x, y = _view(a, a_shape, a_strides, a_offset), _view(b, b_shape, b_strides, b_offset)
    for k, want in ((2, x + y), (3, x + np.exp(y))):
        if got[k].shape != want.shape or not np.allclose(got[k], want, rtol=1e-12, atol=1e-12):
            return f"with your coalesce, an elementwise op of two views of shape {tuple(want.shape)} is wrong"
    return None


# ---- index_view -------------------------------------------------------------------------------------------

def _encode(key: tuple) -> np.ndarray:
    rows = []
    for k in key:
        if k is None:
            rows.append((2, 0, 0, 0))
        elif k is Ellipsis:
            rows.append((3, 0, 0, 0))
        elif isinstance(k, slice):
            rows.append((1, *(NONE if v is None else v for v in (k.start, k.stop, k.step))))
        else:
            rows.append((0, k, 0, 0))
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _decode(rows: np.ndarray) -> tuple:
    items = []
    for kind, a, b, c in np.asarray(rows).reshape(-1, 4).tolist():
        bound = lambda v: None if v == NONE else v
        items.append(a if kind == 0 else slice(bound(a), bound(b), bound(c)) if kind == 1 else None if kind == 2
                     else Ellipsis)
    return tuple(items)


_KEYS = [  # (shape, key)
    ((4, 5, 6), (1,)), ((4, 5, 6), (-1, 2)), ((4, 5, 6), (slice(None, None, -1),)),
    ((4, 5, 6), (slice(1, None, 2), None, -3)), ((4, 5, 6), (Ellipsis, 0)), ((4, 5, 6), (Ellipsis,)),
    ((4, 5, 6), (0, Ellipsis, slice(4, 0, -2))), ((3, 4), (None, None)), ((3, 4), (slice(5, 2),)),
    ((2, 3, 4), (1, 2, 3)), ((3, 4, 2), (Ellipsis, None, 1, slice(None))), ((), (None, Ellipsis)),
    ((0, 3), (slice(None), -1)), ((5,), (slice(-2, None, -3),)), ((3, 4), (3,)), ((3, 4), (0, -5)),
    ((3, 4), (0, 0, 0)), ((3, 4), (Ellipsis, 0, Ellipsis)), ((6, 1, 5), (slice(None, None, 4), 0, slice(-9, 9, 2))),
]


def _random_key(rng: np.random.Generator, ndim: int) -> tuple:
    """A key of ints (some out of range), slices (any bounds and steps, some missing), None and Ellipsis."""
    def item():
        kind = rng.choice(["int", "slice", "slice", "none", "ellipsis"])
        if kind == "int":
            return int(rng.integers(-5, 5))
        if kind == "slice":
            bound = lambda: None if rng.random() < 0.3 else int(rng.integers(-6, 7))  # noqa: E731
            return slice(bound(), bound(), None if rng.random() < 0.3 else int(rng.choice([-3, -2, -1, 1, 2, 3])))
        return None if kind == "none" else Ellipsis
    return tuple(item() for _ in range(int(rng.integers(0, ndim + 2))))


def _index_cases(rng: np.random.Generator) -> list[Case]:
    drawn = [(shape, _random_key(rng, len(shape))) for shape in
             (tuple(int(n) for n in rng.integers(0, 5, size=rng.integers(0, 4))) for _ in range(12))]
    return [(*_layout(rng, shape), _encode(key)) for shape, key in _KEYS + drawn]


def _check_index(case: Case, got: tuple) -> str | None:
    buf, shape, strides, offset, rows = case
    key = _decode(rows)
    x = _view(buf, shape, strides, offset)
    call = f"t[{', '.join('...' if k is Ellipsis else repr(k) for k in key)}] for t of shape {tuple(x.shape)}"
    if len(got) != 6:
        return f"reported {len(got)} values, expected 6"
    try:
        want = x[key + ((Ellipsis,) if Ellipsis not in key else ())]
    except IndexError:
        if np.asarray(got[0]).tolist() != [-1]:
            return f"{call}: numpy raises IndexError, yours did not"
        if np.asarray(got[5]).tolist() != [-1]:
            return f"{call}: numpy raises IndexError, but the compiler's plan (parse_key) did not"
        return None
    if np.asarray(got[0]).tolist() == [-1] and np.asarray(got[2]).tolist() == -1:
        return f"{call} raised IndexError, but numpy takes it: shape {want.shape}"
    if tuple(np.asarray(got[0]).reshape(-1).tolist()) != want.shape:
        return f"{call}: shape {tuple(np.asarray(got[0]).tolist())}, numpy's is {want.shape}"
    # the view's elements sit where numpy's do: compare positions in the buffer, then the values
    pos = _positions(want.shape, np.asarray(got[1]).reshape(-1), int(np.asarray(got[2]))) if want.size else []
    want_pos = _index_positions(shape, strides, offset, key) if want.size else []
    if list(pos) != list(want_pos):
        return (f"{call}: the view reads the wrong elements (strides {tuple(np.asarray(got[1]).tolist())}, "
                f"offset {int(got[2])})")
    if got[3].shape != want.shape or not np.array_equal(got[3], want):
        return f"{call}: wrong values"
    return _check_plan(call, (shape, strides, offset), key, want, np.asarray(got[4]), np.asarray(got[5]).reshape(-1))


def _check_plan(call: str, layout: tuple, key: tuple, want: np.ndarray, spec: np.ndarray, plan_shape) -> str | None:
    """The compiler's plan of t[key]: one (start, stop, step) per axis of t, then a reshape to the result's shape."""
    if plan_shape.tolist() == [-1]:
        return f"{call}: the compiler's plan (parse_key) raised IndexError, but numpy takes it"
    if tuple(plan_shape.tolist()) != want.shape:
        return f"{call}: the compiler's plan has shape {tuple(plan_shape.tolist())}, numpy's is {want.shape}"
    shape, strides, offset = layout
    shape = tuple(int(n) for n in shape)
    spec = spec.reshape(-1, 3)
    if spec.shape != (len(shape), 3):
        return f"{call}: the compiler's plan has {spec.shape[0]} slices for a tensor of {len(shape)} axes"
    picks = [np.arange(a, b, c) if c else np.zeros(0, np.int64) for a, b, c in spec.tolist()]
    if any(p.size and (p.min() < 0 or p.max() >= n) for p, n in zip(picks, shape)):
        return f"{call}: the compiler's plan slices outside the axes: {spec.tolist()}"
    where = _positions(shape, strides, offset).reshape(shape)
    taken = where[np.ix_(*picks)] if shape else where
    if taken.size != want.size or list(taken.reshape(-1)) != list(_index_positions(shape, strides, offset, key)):
        return f"{call}: the compiler's plan {spec.tolist()} picks other elements than numpy's"
    return None
    return None


def _index_positions(shape, strides, offset, key) -> np.ndarray:
    """The buffer positions of t[key]'s elements, by indexing an array that holds each element's position."""
    where = _positions(shape, strides, offset).reshape(tuple(int(n) for n in shape))
    return np.asarray(where[key + ((Ellipsis,) if Ellipsis not in key else ())]).reshape(-1)


# ---- view_strides -----------------------------------------------------------------------------------------

def _reachable(positions: np.ndarray, new_shape: tuple[int, ...]) -> bool:
    """Can some strides read `positions` (row-major order) as `new_shape`? Each axis's stride is forced."""
    if positions.size <= 1:
        return True
    pos = positions.reshape(new_shape)
    guess = [int(pos[tuple(1 if e == d else 0 for e in range(len(new_shape)))] - pos.flat[0]) if n > 1 else 0
             for d, n in enumerate(new_shape)]
    return bool(np.array_equal(_positions(new_shape, guess, pos.flat[0]), positions))


_RESHAPES = [  # (shape, kinds of layout, new shape)
    ((4, 3), "p", (2, 2, 3)), ((4, 3), "p", (12,)), ((2, 3, 4), "r", (2, 12)), ((2, 3), "b", (6,)),
    ((3, 0), "rp", (0, 5)), ((1, 1), "rpb", (1,)), ((), "", (1, 1)), ((6, 5), "s", (3, 2, 5)),
    ((6, 5), "s", (30,)), ((2, 3, 4), "rpbs", (4, 3, 2)), ((2, 3, 4), "rpbs", (6, 4)), ((2, 3, 4), "rpbs", (2, 1, 12)),
    ((5, 1, 4), "rpbs", (5, 4)), ((3, 4, 5), "p", (12, 5)), ((3, 4, 5), "p", (3, 20)), ((8, 3), "r", (2, 4, 3)),
    ((2, 2, 3), "b", (4, 3)), ((2, 2, 3), "b", (2, 6)), ((4, 6), "rpbs", (2, 2, 6)), ((4, 6), "rpbs", (4, 2, 3)),
]


def _view_cases(rng: np.random.Generator) -> list[Case]:
    return [(*_layout(rng, shape, kinds), _ints(new)) for shape, kinds, new in _RESHAPES]


def _check_view(case: Case, got: tuple) -> str | None:
    buf, shape, strides, offset, new_shape = case
    new = tuple(int(n) for n in new_shape)
    call = (f"view_strides({tuple(int(n) for n in shape)}, {tuple(int(s) for s in strides)}, {new})")
    if len(got) != 2:
        return f"reported {len(got)} values, expected 2"
    positions = _positions(shape, strides, offset)
    refused = np.asarray(got[0]).tolist() == [-1] and got[1].size == 0 and np.prod(new) != 0
    if not _reachable(positions, new):
        return None if refused else f"{call}: no strides can read these elements in order; return None"
    if refused:
        return f"{call} returned None, but a view exists"
    if positions.size <= 1:
        return None  # any strides read the one element (or none)
    got_strides = np.asarray(got[0]).reshape(-1)
    if len(got_strides) != len(new) or not np.array_equal(_positions(new, got_strides, offset), positions):
        return f"{call} returned {tuple(got_strides.tolist())}, which reads other elements"
    if not np.array_equal(got[1], _view(buf, shape, strides, offset).reshape(new)):
        return f"{call}: the view's values are wrong"
    return None


# ---- copy -------------------------------------------------------------------------------------------------

_COPIES = [  # (destination shape, source shape: equal, or broadcast to it)
    ((7,), (7,)), ((3, 4), (3, 4)), ((2, 3, 4), (2, 3, 4)), ((4, 1, 5), (4, 1, 5)), ((1, 1), (1, 1)),
    ((3, 4), (4,)), ((2, 3, 4), (3, 1)), ((5, 6), (1, 6)), ((2, 2, 3, 2), (2, 2, 3, 2)), ((2, 1, 3, 4), (1, 3, 1)),
    ((6, 5), (6, 5)), ((3, 2, 4), ()),
]


def _copy_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for dst_shape, src_shape in _COPIES:
        src = _layout(rng, src_shape)
        dst = _layout(rng, dst_shape, "rps")  # a destination reads each of its positions once: no stride 0
        cases.append((*src, *dst))
    return cases


def _check_copy(case: Case, got: tuple) -> str | None:
    src, src_shape, src_strides, src_offset, dst, dst_shape, dst_strides, dst_offset = case
    if len(got) != 3:
        return f"reported {len(got)} values, expected 3"
    x = _view(src, src_shape, src_strides, src_offset)
    shape = tuple(int(n) for n in dst_shape)
    into = f"a source of shape {x.shape}, strides {tuple(int(s) for s in src_strides)}"
    want = dst.copy()
    want[_positions(shape, dst_strides, dst_offset)] = np.broadcast_to(x, shape).reshape(-1)
    if got[0].shape != want.shape or not np.array_equal(got[0], want):
        written = got[0].shape == want.shape and np.array_equal(
            got[0][_positions(shape, dst_strides, dst_offset)], want[_positions(shape, dst_strides, dst_offset)])
        return (f"copying {into} into a view of shape {shape}, strides {tuple(int(s) for s in dst_strides)}: "
                + ("elements outside the view were written" if written else "the view's elements are wrong"))
    if got[1].shape != x.shape or not np.array_equal(got[1], x):
        return f"contiguous() of {into}: wrong values"
    if got[2].dtype != np.float32 or got[2].shape != x.shape or not np.array_equal(got[2], x.astype(np.float32)):
        return f"the float32 cast of {into}: wrong values"
    return None


PARTS = {
    "coalesce": Part(cases=_coalesce_cases, check=_check_coalesce),
    "indexing": Part(cases=_index_cases, check=_check_index),
    "view_strides": Part(cases=_view_cases, check=_check_view),
    "copy": Part(cases=_copy_cases, check=_check_copy),
}
