"""Judge for assignment 02-tensors: strided tensors by hand (exercises/02-tensors.ipynb).

Shapes, strides, indices and permutations travel as 1-D int64 arrays (the hidden tests turn them back into
tuples), and the learner's tuples come back as arrays. The references below are plain Python, written from
the definitions; tests/test_chapter2.py checks them against numpy's own strides and broadcasting.

The edge cases every shape part sees: a 0-d shape (), size-0 and size-1 dimensions, negative strides (a
reversed slice) and stride 0 (a broadcast dimension).

`broadcast_shape` must raise ValueError for incompatible shapes; its hidden test reports such a call as
the array [-1] (no real shape contains -1), and the reference does the same.

`add_kernel` is judged through teenygrad: the hidden test builds views of the case's arrays with teenygrad
(a transpose, stepped and reversed slices, broadcast rows and columns), adds them with the learner's kernel
swapped in (`teenygrad.kernels.use(add=add_kernel)`), and reports the result. The reference builds the same
views of the same arrays in numpy. `VIEWS` below is that construction, one recipe per case kind; the hidden
cell of solutions/02-tensors.ipynb spells out the same recipes, and a test keeps the two in step.
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

ERROR = np.array([-1], dtype=np.int64)  # how a hidden test reports "raised ValueError"


def _ints(values) -> np.ndarray:
    return np.array(list(values), dtype=np.int64).reshape(-1)


def _show(arr: np.ndarray) -> str:
    """A shape-like array as the tuple a learner would see: (3, 4), (5,), ()."""
    values = tuple(int(v) for v in np.asarray(arr).reshape(-1))
    return str(values)


def _random_shape(rng: np.random.Generator, ndim: int, low: int = 1, high: int = 6) -> tuple[int, ...]:
    return tuple(int(n) for n in rng.integers(low, high, size=ndim))


def _same_ints(got: np.ndarray, want: np.ndarray) -> bool:
    got = np.asarray(got)
    if not (np.issubdtype(got.dtype, np.number) and got.shape == want.shape):
        return False
    return bool(np.all(got == want))


# ---- contiguous_strides -----------------------------------------------------------------------------------

def _contiguous_strides(shape: np.ndarray) -> np.ndarray:
    """Row-major strides: the product of the sizes after each axis (a size 0 counts as 1, as in teenygrad)."""
    strides, acc = [], 1
    for n in reversed([int(s) for s in shape]):
        strides.append(acc)
        acc *= max(n, 1)
    return _ints(reversed(strides))


def _plain_product_strides(shape: np.ndarray) -> np.ndarray:
    """The same without the guard: a size-0 dimension zeroes the strides before it. Equally right (a tensor
    with no elements never reads its strides), so the judge accepts it too."""
    strides, acc = [], 1
    for n in reversed([int(s) for s in shape]):
        strides.append(acc)
        acc *= n
    return _ints(reversed(strides))


def _strides_cases(rng: np.random.Generator) -> list[Case]:
    fixed = [(), (1,), (7,), (3, 4), (2, 0, 3), (1, 5, 1), (4, 1, 1, 2)]
    drawn = [_random_shape(rng, int(rng.integers(2, 6))) for _ in range(3)]
    return [(_ints(s),) for s in fixed + drawn]


def _check_strides(case: Case, got: tuple) -> str | None:
    (shape,) = case
    if len(got) != 1:
        return f"returned {len(got)} values, expected one tuple"
    want = _contiguous_strides(shape)
    if _same_ints(got[0], want) or (0 in shape and _same_ints(got[0], _plain_product_strides(shape))):
        return None
    return f"contiguous_strides({_show(shape)}) returned {_show(got[0])}, expected {_show(want)}"


# ---- offset_of --------------------------------------------------------------------------------------------

def _offset_of(index: np.ndarray, strides: np.ndarray, offset: int) -> np.ndarray:
    position = int(offset)
    for i, s in zip(index, strides):
        position += int(i) * int(s)
    return np.asarray(position, dtype=np.int64)


def _offset_cases(rng: np.random.Generator) -> list[Case]:
    """Indices into real-looking layouts: contiguous, transposed, reversed (negative strides), broadcast (0)."""
    cases = [(_ints(()), _ints(()), 7),  # a 0-d tensor: its one element sits at the offset
             (_ints((0,)), _ints((1,)), 0),
             (_ints((2, 3)), _ints((-4, 1)), 11),  # a reversed slice: negative stride, offset at the end
             (_ints((1, 2)), _ints((0, 1)), 3)]  # a broadcast row: stride 0
    for _ in range(5):
        shape = _random_shape(rng, int(rng.integers(1, 5)))
        strides = [int(s) * int(rng.choice([1, 1, 2, -1, 0])) for s in _contiguous_strides(_ints(shape))]
        rng.shuffle(strides)  # a permuted view
        index = [int(rng.integers(0, n)) for n in shape]
        offset = int(rng.integers(0, 100))
        cases.append((_ints(index), _ints(strides), offset))
    return cases


def _check_offset(case: Case, got: tuple) -> str | None:
    index, strides, offset = case
    want = _offset_of(index, strides, offset)
    if len(got) == 1 and _same_ints(got[0], want):
        return None
    shown = got[0] if len(got) == 1 else got
    return (f"offset_of({_show(index)}, {_show(strides)}, {offset}) returned {np.asarray(shown).tolist()}, "
            f"expected {int(want)}")


# ---- broadcast_shape --------------------------------------------------------------------------------------

def _broadcast_shape(shape_a: np.ndarray, shape_b: np.ndarray) -> np.ndarray:
    """numpy's rule: align on the right, pad with 1s; equal sizes, or one of them 1. ERROR when incompatible."""
    a, b = [int(s) for s in shape_a], [int(s) for s in shape_b]
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            return ERROR
        out.append(y if x == 1 else x)
    return _ints(out)


def _broadcast_cases(rng: np.random.Generator) -> list[Case]:
    fixed = [((), ()), ((), (3, 1)), ((4, 3), (3,)), ((5, 1, 4), (3, 1)), ((2, 1), (0,)), ((1,), (0,)),
             ((3,), (4,)), ((2, 3), (3, 2)), ((0,), (2,))]
    drawn = []
    for compatible in (True, True, False):
        out = _random_shape(rng, int(rng.integers(2, 5)), low=2)
        a = tuple(1 if rng.random() < 0.4 else n for n in out)
        b = tuple(1 if rng.random() < 0.4 else n for n in out)[int(rng.integers(0, 2)):]
        if not compatible:  # make one aligned pair differ, both sizes >= 2
            k = -1 - int(rng.integers(0, len(b)))
            b = b[:len(b) + k] + (out[k] + 1,) + (b[len(b) + k + 1:])
            a = a[:len(a) + k] + (out[k],) + (a[len(a) + k + 1:])
        drawn.append((a, b) if rng.random() < 0.5 else (b, a))
    return [(_ints(a), _ints(b)) for a, b in fixed + drawn]


def _check_broadcast(case: Case, got: tuple) -> str | None:
    a, b = case
    want = _broadcast_shape(a, b)
    call = f"broadcast_shape({_show(a)}, {_show(b)})"
    if len(got) != 1:
        return f"{call} returned {len(got)} values, expected one tuple"
    raised = _same_ints(got[0], ERROR)
    if want is ERROR:
        return None if raised else f"{call} returned {_show(got[0])}; these shapes do not broadcast, raise ValueError"
    if raised:
        return f"{call} raised ValueError, but the shapes broadcast to {_show(want)}"
    return None if _same_ints(got[0], want) else f"{call} returned {_show(got[0])}, expected {_show(want)}"


# ---- permute_view -----------------------------------------------------------------------------------------

def _permute_view(shape: np.ndarray, strides: np.ndarray, perm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return _ints(int(shape[p]) for p in perm), _ints(int(strides[p]) for p in perm)


def _permute_cases(rng: np.random.Generator) -> list[Case]:
    cases = [(_ints(()), _ints(()), _ints(())),  # a 0-d tensor: nothing to permute
             (_ints((5,)), _ints((-1,)), _ints((0,))),
             (_ints((3, 4)), _ints((4, 1)), _ints((1, 0))),  # the transpose
             (_ints((2, 1, 3)), _ints((0, 3, 1)), _ints((2, 0, 1)))]  # a broadcast axis and a size-1 axis
    for ndim in (3, 4, 5, 4):
        shape = _random_shape(rng, ndim, low=0)
        strides = [int(s) * int(rng.choice([1, 2, -1, 0])) for s in _contiguous_strides(_ints(shape))]
        cases.append((_ints(shape), _ints(strides), _ints(rng.permutation(ndim))))
    return cases


def _check_permute(case: Case, got: tuple) -> str | None:
    shape, strides, perm = case
    want = _permute_view(shape, strides, perm)
    call = f"permute_view({_show(shape)}, {_show(strides)}, {_show(perm)})"
    if len(got) != 2:
        return f"{call} returned {len(got)} values, expected two tuples (shape, strides)"
    if _same_ints(got[0], want[0]) and _same_ints(got[1], want[1]):
        return None
    return (f"{call} returned shape {_show(got[0])} and strides {_show(got[1])}, "
            f"expected {_show(want[0])} and {_show(want[1])}")


# ---- add_kernel, through teenygrad ------------------------------------------------------------------------

# How each case's two arrays become the operands of one addition. The hidden test applies the same recipe to
# teenygrad tensors; here numpy gives the answer. Every recipe reads the same in both libraries.
VIEWS = {
    0: lambda x, y: (x, y),                              # contiguous, same shape: one flat loop
    1: lambda x, y: (x.T, y),                            # a transposed view plus a contiguous matrix
    2: lambda x, y: (x[::-1, ::2], y[1:, ::-1]),         # stepped and reversed slices: negative strides
    3: lambda x, y: (x, y[0]),                           # a broadcast row (stride 0 down the columns)
    4: lambda x, y: (x[:, 1:2], y[::2]),                 # a broadcast column plus a stepped slice
    5: lambda x, y: (x[:, None], y),                     # an outer sum: both operands broadcast
    6: lambda x, y: (x.T[::-1], y[:, None, ::2]),        # 3-D: reversed all axes, and a broadcast middle axis
    7: lambda x, y: (x[0, 0], y),                        # a 0-d tensor plus a matrix
    8: lambda x, y: (x[:0], y[0]),                       # no elements at all: the kernel is never called
}

# the shapes of the two arrays for each recipe (before the views), small enough for a pure-Python kernel
_ADD_SHAPES = {
    0: lambda r: ((r(1, 30),), None),
    1: lambda r: ((r(2, 6), r(2, 6)), "swap"),
    2: lambda r: ((r(2, 7), r(2, 9)), "slices"),
    3: lambda r: ((r(2, 6), r(2, 6)), "row"),
    4: lambda r: ((r(2, 6), 3), "column"),
    5: lambda r: ((r(2, 7),), "outer"),
    6: lambda r: ((r(2, 4), r(2, 4), r(2, 4)), "3d"),
    7: lambda r: ((1, 1), "scalar"),
    8: lambda r: ((r(1, 4), r(2, 5)), "row"),
}


def _add_arrays(rng: np.random.Generator, kind: int) -> tuple[np.ndarray, np.ndarray]:
    """Two float64 arrays whose views under VIEWS[kind] broadcast together."""
    r = lambda lo, hi: int(rng.integers(lo, hi))
    shape_x, how = _ADD_SHAPES[kind](r)
    x = rng.normal(size=shape_x)
    if how is None:
        shape_y = shape_x
    elif how == "swap":  # y matches x.T
        shape_y = shape_x[::-1]
    elif how == "slices":  # y[1:, ::-1] has the shape of x[::-1, ::2]
        shape_y = (shape_x[0] + 1, len(range(0, shape_x[1], 2)))
    elif how == "row":  # y[0] is a row of x's width
        shape_y = (r(1, 4), shape_x[-1])
    elif how == "column":  # y[::2] has shape (rows, w): x[:, 1:2] is its column
        shape_y = (2 * shape_x[0] - 1, r(2, 6))
    elif how == "outer":  # x[:, None] is a column of length n, y a row
        shape_y = (r(2, 7),)
    elif how == "3d":  # x.T[::-1] has shape (c, b, a); y[:, None, ::2] has shape (c, 1, a)
        c, _, a = shape_x[::-1]
        shape_y = (c, 2 * a - r(0, 2))
    else:  # "scalar": x[0, 0] is 0-d
        shape_y = (r(2, 5), r(2, 5))
    return x, rng.normal(size=shape_y)


def _add_cases(rng: np.random.Generator) -> list[Case]:
    return [(kind, *_add_arrays(rng, kind)) for kind in VIEWS]


def _add_on_views(kind: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    x, y = VIEWS[int(kind)](a, b)
    return x + y


PARTS = {
    "contiguous_strides": Part(cases=_strides_cases, check=_check_strides),
    "offset_of": Part(cases=_offset_cases, check=_check_offset),
    "broadcast_shape": Part(cases=_broadcast_cases, check=_check_broadcast),
    "permute_view": Part(cases=_permute_cases, check=_check_permute),
    # one float64 add per element, in any order of loops: exact up to the last bit, but allow for fma
    "add_kernel": Part(cases=_add_cases, reference=_add_on_views, rtol=1e-12, atol=1e-12),
}
