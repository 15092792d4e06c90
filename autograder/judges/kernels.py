"""Judge for assignment 03-kernels: numba kernels (exercises/03-kernels.ipynb).

The learner writes five parts of teenygrad's kernels (`@exercise` in `teenygrad/kernels/`), and the hidden tests
install them and run *teenygrad itself* on top of them:

* `binary` (`sub`, `mul`, `div`, `pow`, `maximum`, `compare`: `KERNELS["sub"]`, ..., `KERNELS["lt"]`, ...):
  teenygrad's arithmetic and comparisons on broadcast strided views of two random operands (`BINARY_VIEWS`,
  spelled out once for both sides), with every special value planted (ties, signed zeros, inf, nan): IEEE division
  and powers, nan wins in maximum.

* `max_rows` (`max_rows`, `argmax_rows`): `t.max(...)` and `t.argmax(...)` on views (`MAX_VIEWS`), with ties, nans
  and an int64 case, compared exactly (numpy's rules: nan is never lost, ties go to the first position).

* `sum_rows`, the `sum` kernel (`KERNELS["sum"]`): teenygrad's `t.sum(...)` on strided views of each case
  (a step slice, a transpose, a flip, an empty axis); the reference is numpy on the same views (`SUM_VIEWS`
  spells them out once for both sides, and tests/test_ch03_kernels.py checks the hidden cell builds them).

* `matmul_blocked`, the launcher of the cache-blocked matrix multiply, is checked to be *blocked*, not only
  right. Its hidden test installs a tile kernel of the grader's in place of `blocked.matmul_tile` that records
  every tile it is given (and adds the tile's product into `out`), then runs the learner's launcher with block
  sizes drawn by the judge, which do not divide the matrix. The judge checks the recorded tiles are exactly
  the partition of the (M, K, N) iteration space into those blocks, each tile once (any order), and that `out`
  is the product. This is sound and not flaky: it observes the loop structure itself, with no timing and
  no rounding involved, and a launcher that computes the product in one piece (or with other blocks, or calls
  a tile twice) is told which tiles it missed or repeated.

* `matmul_tile`, the compiled tile kernel: the contract fixes its arithmetic (each out[i, j] of the tile gets
  a[i, k] * b[k, j] added for k increasing, one multiply and one add at a time in out's dtype), so the judge
  compares the tile with that order *bit for bit* (computed here in numpy, one k at a time) and checks that
  nothing outside the tile changed. A numpy `a @ b` (BLAS: other summation order, fused multiply-adds) or a
  wider accumulator differs in the last bits and is caught; LLVM does not reassociate or fuse a numba loop
  without fastmath, so an honest loop matches exactly (tests/test_ch03_kernels.py checks teenygrad's own).
  Its speed is timed by the grader (`autograder/speed.py`), never in the learner's process, whose clock could
  be faked: the harness runs the notebook's setup cell and this part's solution cell in a sandbox of their own
  and times `tile_product` (the setup cell's helper: the learner's tile kernel over the whole matrix) on fresh
  inputs against teenygrad's i-k-j loop `matmul_reordered`, served and timed the same way (`SPEEDUP` says how fast).
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part
from autograder.speed import Speed

# ---- sum_rows, through teenygrad's reductions ----------------------------------------------------------------

SUM_VIEWS = {  # name -> (numpy view of x, axis); each name is what the hidden cell calls on a teenygrad Tensor t
    "t.sum()": (lambda x: x, None),
    "t.sum(axis=0)": (lambda x: x, 0),
    "t.sum(axis=-1)": (lambda x: x, -1),
    "t.T.sum(axis=-1)": (lambda x: x.T, -1),
    "t[::2, ::-1].sum(axis=1)": (lambda x: x[::2, ::-1], 1),
}


def _sum(x: np.ndarray) -> tuple:
    return tuple(np.sum(view(x).astype(np.float64), axis=axis).astype(x.dtype) for view, axis in SUM_VIEWS.values())


def _sum_cases(rng: np.random.Generator) -> list[Case]:
    shapes = [(1, 1), (1, 7), (6, 1), (5, 8), (31, 23), (4, 0), (3, 4, 5), (2, 3, 2, 4)]
    cases = [(rng.normal(size=s).astype(np.float32),) for s in shapes]
    cases.append((rng.normal(size=(9, 13)),))  # float64
    return cases


# ---- binary: teenygrad's arithmetic and comparisons on broadcast strided views ----------------------------------

BINARY_VIEWS = {  # name -> numpy on (x, y); each name is what the hidden cell computes on Tensors t = x, s = y
    "t - s.T": lambda x, y: x - y.T,
    "2.5 - t[::-1]": lambda x, y: 2.5 - x[::-1],
    "t / s.T": lambda x, y: x / y.T,
    "t[:, ::-1] / s.T[:1]": lambda x, y: x[:, ::-1] / y.T[:1],
    "1.0 / t": lambda x, y: 1.0 / x,
    "t * s.T": lambda x, y: x * y.T,
    "t[::-1] * 3.0": lambda x, y: x[::-1] * 3.0,
    "t.abs() ** s.T": lambda x, y: np.abs(x) ** y.T,
    "t ** 2.0": lambda x, y: x ** 2.0,
    "t.maximum(s.T)": lambda x, y: np.maximum(x, y.T),
    "t.T.maximum(s[:, :1])": lambda x, y: np.maximum(x.T, y[:, :1]),
    "t == s.T": lambda x, y: x == y.T,
    "t != s.T[::-1]": lambda x, y: x != y.T[::-1],
    "t < s.T[:1]": lambda x, y: x < y.T[:1],
    "t.T <= s": lambda x, y: x.T <= y,
    "t[::-1] > s.T": lambda x, y: x[::-1] > y.T,
    "t >= 0.5": lambda x, y: x >= 0.5,
}

# values that test the rules: ties (comparisons, maximum's tie goes to a), zeros (x / 0, 0 / 0), inf and nan
_SPECIAL = np.array([-1.5, -1.0, -0.5, 0.0, -0.0, 0.5, 1.0, 2.25, np.inf, -np.inf, np.nan])


def _binary(x: np.ndarray, y: np.ndarray) -> tuple:
    with np.errstate(divide="ignore", invalid="ignore"):
        return tuple(np.asarray(f(x, y)).astype(x.dtype) for f in BINARY_VIEWS.values())


def _binary_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for (m, n), dtype, special in [((1, 1), np.float32, 0.0), ((1, 9), np.float32, 0.5), ((8, 1), np.float64, 0.5),
                                    ((5, 7), np.float32, 0.6), ((16, 33), np.float32, 0.3), ((6, 6), np.float64, 0.4),
                                    ((40, 3), np.float32, 0.2)]:
        x, y = (np.where(rng.random(size) < special, rng.choice(_SPECIAL, size), rng.normal(size=size)).astype(dtype)
                for size in ((m, n), (n, m)))
        if special:  # every special value at least once in each operand, at random places
            for z in (x, y):
                k = min(z.size, len(_SPECIAL))
                z.flat[rng.permutation(z.size)[:k]] = rng.permutation(_SPECIAL)[:k]
        cases.append((x, y))
    return cases


def _check_binary(case: Case, got: tuple) -> str | None:
    want = _binary(*case)
    if len(got) != len(want):
        return f"reported {len(got)} values, expected {len(want)}"
    shape = f"x {case[0].shape} {case[0].dtype}, y {case[1].shape}"
    for name, g, w in zip(BINARY_VIEWS, got, want):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"{name} for {shape}: {g.shape} {g.dtype}, expected {w.shape} {w.dtype}"
        if not np.allclose(g, w, rtol=1e-6, atol=0, equal_nan=True):
            k = np.flatnonzero(~np.isclose(g, w, rtol=1e-6, atol=0, equal_nan=True))[0]
            return f"{name} for {shape}: element {np.unravel_index(k, w.shape)} is {g.flat[k]}, expected {w.flat[k]}"
        if not np.array_equal(np.signbit(g[np.isinf(w)]), np.signbit(w[np.isinf(w)])):
            return f"{name} for {shape}: an infinity has the wrong sign (x / 0 is inf with the signs of x and the zero)"
    return None


# ---- max_rows and argmax_rows, through teenygrad's reductions ----------------------------------------------------

MAX_VIEWS = {  # name -> (numpy view of x, reduction, axis)
    "t.max()": (lambda x: x, "max", None),
    "t.max(axis=0)": (lambda x: x, "max", 0),
    "t[::-1].max(axis=0)": (lambda x: x[::-1], "max", 0),
    "t[::2, ::-1].max(axis=1)": (lambda x: x[::2, ::-1], "max", 1),
    "t.argmax()": (lambda x: x, "argmax", None),
    "t.argmax(axis=0)": (lambda x: x, "argmax", 0),
    "t.argmax(axis=-1)": (lambda x: x, "argmax", -1),
    "t[:, ::-1].argmax(axis=1)": (lambda x: x[:, ::-1], "argmax", 1),
}


def _max(x: np.ndarray) -> tuple:
    return tuple(np.asarray(getattr(np, op)(view(x), axis=axis)) for view, op, axis in MAX_VIEWS.values())


def _max_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for shape, dtype, nans in [((1, 1), np.float32, 0.0), ((1, 7), np.float32, 0.0), ((6, 1), np.float64, 0.0),
                               ((5, 8), np.float32, 0.0), ((31, 23), np.float32, 0.0), ((9, 13), np.float64, 0.05),
                               ((4, 6), np.float32, 0.2), ((3, 4, 5), np.float32, 0.0), ((7, 9), np.int64, 0.0)]:
        ties = rng.integers(-3, 4, size=shape)  # small integers: many ties for argmax to break
        if dtype == np.int64:
            cases.append((ties.astype(np.int64),))
            continue
        x = np.where(rng.random(shape) < 0.5, ties, rng.normal(size=shape)).astype(dtype)
        x[rng.random(shape) < nans] = np.nan
        cases.append((x,))
    return cases


def _check_max(case: Case, got: tuple) -> str | None:
    (x,) = case
    want = _max(x)
    if len(got) != len(want):
        return f"reported {len(got)} values, expected {len(want)}"
    for name, g, w in zip(MAX_VIEWS, got, want):
        if g.shape != w.shape:
            return f"{name} for x of shape {x.shape}: shape {g.shape}, expected {w.shape}"
        wrong = ~((g == w) | (np.isnan(g) & np.isnan(w)) if w.dtype.kind == "f" else g == w)
        if wrong.any():
            k = np.flatnonzero(wrong)[0]
            rule = ("the first position on ties, the first nan if there is one" if "argmax" in name
                    else "nan if any element is nan")
            return (f"{name} for x {x.shape} {x.dtype}: got {g.flat[k]}, expected {w.flat[k]} at output position "
                    f"{np.unravel_index(k, w.shape) if w.ndim else ()} ({rule})")
    return None


# ---- matmul_blocked: the tiles it asks for --------------------------------------------------------------------

# (M, K, N, block_i, block_k, block_j): blocks that do not divide the sizes, blocks of one, blocks larger than the
# matrix (one tile), and empty products (K = 0: no tile, out all zeros; M or N = 0: nothing at all)
_BLOCKED_SHAPES = [(1, 1, 1, 1, 1, 1), (5, 3, 4, 2, 2, 3), (13, 17, 11, 4, 5, 3), (37, 41, 29, 8, 16, 7),
                   (6, 9, 10, 32, 128, 1024), (9, 9, 9, 3, 1, 9), (3, 0, 4, 2, 2, 2), (0, 4, 5, 2, 2, 2),
                   (4, 5, 0, 2, 2, 2), (23, 7, 31, 5, 7, 6)]


def _blocked_cases(rng: np.random.Generator) -> list[Case]:
    return [(rng.normal(size=(m, k)).astype(np.float32), rng.normal(size=(k, n)).astype(np.float32),
             np.array(blocks, dtype=np.int64)) for m, k, n, *blocks in _BLOCKED_SHAPES]


def tiles(M: int, K: int, N: int, block_i: int, block_k: int, block_j: int) -> list[tuple[int, ...]]:
    """Every tile (i0, i1, k0, k1, j0, j1) of the blocked loops, each once, in i-k-j order."""
    return [(i0, min(i0 + block_i, M), k0, min(k0 + block_k, K), j0, min(j0 + block_j, N))
            for i0 in range(0, M, block_i) for k0 in range(0, K, block_k) for j0 in range(0, N, block_j)]


def _check_blocked(case: Case, got: tuple) -> str | None:
    a, b, blocks = case
    (M, K), N = a.shape, b.shape[1]
    shape = f"({M}, {K}) @ ({K}, {N}) with blocks {tuple(int(s) for s in blocks)}"
    if len(got) != 2:
        return f"reported {len(got)} values, expected the product and the tiles"
    out, seen = got
    want = tiles(M, K, N, *(int(s) for s in blocks))
    seen = [tuple(int(v) for v in row) for row in np.asarray(seen).reshape(-1, 6)] if np.size(seen) else []
    if not seen and want:
        return f"{shape}: blocked.matmul_tile was never called (call the tile kernel through teenygrad)"
    repeated = sorted({t for t in seen if seen.count(t) > 1})
    if repeated:
        return f"{shape}: matmul_tile was called more than once on tile {repeated[0]}"
    missing, extra = sorted(set(want) - set(seen)), sorted(set(seen) - set(want))
    if missing or extra:
        which = (f"the tile {extra[0]} is not one of the blocks" if extra
                 else f"the tile {missing[0]} was never computed")
        return f"{shape}: {len(seen)} tiles, expected {len(want)}; {which} (i0, i1, k0, k1, j0, j1)"
    if out.shape != (M, N):
        return f"{shape}: out has shape {out.shape}"
    if not np.allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4):
        return f"{shape}: the tiles are right but out is not the product (is it zeroed first, also when K = 0?)"
    return None


# ---- matmul_tile: bit for bit, and nothing outside the tile ---------------------------------------------------

def one_k_at_a_time(a: np.ndarray, b: np.ndarray, out: np.ndarray, bounds) -> np.ndarray:
    """The contract's arithmetic: out[i, j] += a[i, k] * b[k, j] for k increasing, each product and each sum
    rounded to out's dtype (numpy's elementwise float32 ops round every result; nothing is fused)."""
    i0, i1, k0, k1, j0, j1 = (int(v) for v in bounds)
    out = out.copy()
    for k in range(k0, k1):
        out[i0:i1, j0:j1] = out[i0:i1, j0:j1] + a[i0:i1, k:k + 1] * b[k:k + 1, j0:j1]
    return out


# (M, K, N, (i0, i1, k0, k1, j0, j1)): whole matrices, inner tiles, single elements, empty ranges, primes
_TILES = [(1, 1, 1, (0, 1, 0, 1, 0, 1)), (6, 5, 7, (1, 4, 2, 5, 3, 7)), (9, 8, 7, (3, 3, 0, 8, 0, 7)),
          (9, 8, 7, (0, 9, 4, 4, 0, 7)), (9, 8, 7, (0, 9, 0, 8, 2, 2)), (40, 30, 50, (0, 40, 0, 30, 0, 50)),
          (37, 41, 43, (2, 35, 3, 39, 1, 42)), (64, 129, 70, (13, 50, 0, 129, 5, 70)),
          (20, 33, 17, (19, 20, 7, 32, 16, 17))]


def _tile_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for m, k, n, bounds in _TILES:
        a, b, out = (rng.normal(size=s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
        cases.append((a, b, out, np.array(bounds, dtype=np.int64)))
    a, b, out = (rng.normal(size=s) for s in ((11, 13, ), (13, 9), (11, 9)))  # float64: out's dtype, too
    cases.append((a, b, out, np.array((2, 10, 1, 12, 0, 9), dtype=np.int64)))
    return cases


def _check_tile(case: Case, got: tuple) -> str | None:
    a, b, out, bounds = case
    i0, i1, k0, k1, j0, j1 = (int(v) for v in bounds)
    where = f"tile {(i0, i1, k0, k1, j0, j1)} of ({a.shape[0]}, {a.shape[1]}) @ ({b.shape[0]}, {b.shape[1]})"
    if len(got) != 1:
        return f"reported {len(got)} values, expected out"
    got = got[0]
    want = one_k_at_a_time(a, b, out, bounds)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"{where}: out came back as {got.shape} {got.dtype}, expected {want.shape} {want.dtype}"
    inside = np.zeros(want.shape, bool)
    inside[i0:i1, j0:j1] = True
    if not np.array_equal(got[~inside], want[~inside]):
        return f"{where}: elements of out outside the tile changed"
    if not np.allclose(got, want, rtol=1e-4, atol=1e-4):
        return f"{where}: wrong by up to {np.max(np.abs(got.astype(np.float64) - want)):.3g}"
    if not np.array_equal(got, want):
        return (f"{where}: right to {np.max(np.abs(got.astype(np.float64) - want)):.2g} but not bit for bit the fixed "
                "arithmetic (one a[i, k] * b[k, j] added at a time, k increasing, in out's dtype)")
    return None


SPEED_SIZE = 320  # large enough that the pipe's transfer of the matrices does not hide the kernel's speed
SPEED_REFERENCE = "teenygrad.kernels.matmul:matmul_reordered"  # the package's own i-k-j loop (chapter 3's step 2)
SPEEDUP = 0.4  # the learner's tile kernel over the whole matrix must reach this fraction of matmul_reordered's speed
# Measured by the grader's harness at 320 on the book's 2-core machine (pipe transfer included on both sides,
# 2026-12-02, three runs each): the solution's i-k-j tile kernel, whose inner loop vectorises, 1.1 of
# matmul_reordered's speed; the naive i-j-k loop 0.094-0.10; an i-k-j loop whose inner index is not provably
# non-negative (so not vectorised) 0.14-0.15. A bar of 0.4 leaves an honest kernel 2.75x of room on a
# busy grading machine and fails the naive loop by 4x, with no second try for it (a near miss is within half the bar:
# autograder/speed.py). The reference is a loop of the same kind as the learner's on purpose: against the
# register-tiled `matmul_tiled` the same solution measured 0.72-0.8, then 0.29-0.32, then 0.12 on CI's machine (its
# micro-kernel's gain over a plain loop depends on the CPU's vector units), so no one bar held on every machine.


def _speed_arguments(rng: np.random.Generator) -> tuple:
    """One timed call of tile_product: fresh a and b, and an output full of NaN (tile_product zeroes it)."""
    n = SPEED_SIZE
    return (rng.normal(size=(n, n)).astype(np.float32), rng.normal(size=(n, n)).astype(np.float32),
            np.full((n, n), np.nan, dtype=np.float32))


SPEED = Speed(function="tile_product", reference=SPEED_REFERENCE,
              arguments=_speed_arguments, expected=lambda a, b: a.astype(np.float64) @ b.astype(np.float64),
              speedup=SPEEDUP)


PARTS = {
    "binary": Part(cases=_binary_cases, check=_check_binary),
    # float32 sums compared with float64 references rounded to float32 (sums of up to ~1000 terms of size ~1)
    "sum_rows": Part(cases=_sum_cases, reference=_sum, rtol=1e-4, atol=1e-4),
    "max_rows": Part(cases=_max_cases, check=_check_max),
    "matmul_blocked": Part(cases=_blocked_cases, check=_check_blocked),
    "matmul_tile": Part(cases=_tile_cases, check=_check_tile, speed=SPEED),
}
