"""Judge for assignment 11-gpu-kernels: three pieces of teenygrad's GPU kernels (exercises/11-gpu-kernels.ipynb),
all run in numba-cuda's simulator (every sandbox switches it on before the learner's process starts:
`autograder.sandbox.SIMULATED_GPU`), so a machine without a GPU grades them, and one with a GPU grades them the
same way. The simulator runs every thread in Python, so every shape here is a few blocks; and each thread of a
running block is a thread of the sandbox, which may start only `Limits.max_processes` (64) with the kernel's own
and numba's: every block here has at most 16 threads.

* `tiled`, the shared-memory tiled SGEMM `sgemm_shared(a, b, out, tile)`, is judged twice. By its values: the
  hidden test runs the launcher through teenygrad on the judge's matrices, whose sizes are not multiples of the
  tile (and one of a single element), `out` filled with nan. By its global-memory traffic, counted here: after the
  notebook has run, the grader runs the part's cells in a sandbox of their own (`autograder/traffic.py`) and hands
  the launcher arrays whose elements live in the grader, so it counts every load and store as it serves them. The
  contract fixes the traffic of a tile x tile kernel exactly: each element of A loaded ceil(N / tile) times, each
  element of B ceil(M / tile) times, each element of out stored once and never read. A naive kernel (N loads of
  each A), a kernel that reloads, reads past an edge, or reads out (out arrives full of nan), and the package's
  other rungs of the ladder (larger, fixed tiles: fewer loads than the judge's small tiles need) are all told
  which count is off; so is a kernel that fetches everything once and multiplies elsewhere.
* `softmax`, the rows' softmax `softmax_rows(x, out, threads)` as block reductions: values against numpy in
  float64, on rows longer and shorter than the block, one row, one column, and rows of large magnitude (a softmax
  that does not subtract the row's max overflows to inf and nan there).
* `launch`, `launch_config(shape, threads)`: judged by the properties its contract states (limits, coverage, no
  idle block, coalescing, busy blocks) on shapes of 1 to 3 axes, empty ones and ones past the grid's caps.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judges import Case, Part
from autograder.traffic import Traffic

# ---- tiled -------------------------------------------------------------------------------------------------------

# (M, K, N, tile): sizes that are not multiples of the tile, a single element, a tile larger than the matrix, K = 1,
# tiles of one
_TILED_SHAPES = [(1, 1, 1, 2), (5, 3, 7, 4), (9, 6, 4, 2), (6, 11, 5, 4), (3, 1, 9, 4), (7, 5, 2, 2), (3, 4, 2, 1)]
# the calls whose traffic the grader counts (every load is a round trip through a pipe): a few blocks each
_TRAFFIC_SHAPES = [(7, 5, 6, 4), (5, 9, 3, 2)]


def _tiled_cases(rng: np.random.Generator) -> list[Case]:
    return [(rng.normal(size=(m, k)).astype(np.float32), rng.normal(size=(k, n)).astype(np.float32),
             np.int64(tile)) for m, k, n, tile in _TILED_SHAPES]


def _product(a: np.ndarray, b: np.ndarray, tile: int) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


def _traffic_calls(rng: np.random.Generator) -> list[tuple[list[np.ndarray], list]]:
    return [([rng.normal(size=(m, k)), rng.normal(size=(k, n)), np.full((m, n), np.nan)], [tile])
            for m, k, n, tile in _TRAFFIC_SHAPES]


def _wrong_count(name: str, counts: np.ndarray, want: int, what: str, why: str = "") -> str | None:
    """Why `counts` (per element) is not `want` everywhere, naming one element that is off."""
    off = np.argwhere(counts != want)
    if not off.size:
        return None
    where = tuple(int(i) for i in off[0])
    return (f"{name}{list(where)} was {what} {int(counts[where])} times; the contract says {why}{want} "
            f"({len(off)} of {counts.size} elements of {name} are off)")


def _check_traffic(given: list[np.ndarray], args: list, after: list[np.ndarray], loads: list[np.ndarray],
                   stores: list[np.ndarray]) -> str | None:
    a, b, _ = given
    tile = int(args[0])
    M, N = a.shape[0], b.shape[1]
    return (_wrong_count("out", loads[2], 0, "read") or _wrong_count("out", stores[2], 1, "stored")
            or _wrong_count("a", loads[0], math.ceil(N / tile), "loaded", f"ceil(N / tile) = ceil({N} / {tile}) = ")
            or _wrong_count("b", loads[1], math.ceil(M / tile), "loaded", f"ceil(M / tile) = ceil({M} / {tile}) = ")
            or _wrong_count("a", stores[0], 0, "written") or _wrong_count("b", stores[1], 0, "written")
            or (None if np.allclose(after[2], a.astype(np.float64) @ b, rtol=1e-4, atol=1e-5) else "out is not a @ b"))


# ---- softmax -----------------------------------------------------------------------------------------------------

# (M, N, threads, scale): rows shorter and longer than the block, one row, one column, large magnitudes
_SOFTMAX_SHAPES = [(1, 1, 1, 1.0), (1, 9, 4, 1.0), (5, 1, 8, 3.0), (3, 17, 8, 1.0), (2, 40, 16, 30.0),
                   (4, 33, 16, 1.0), (2, 6, 2, 1e4)]


def _softmax_cases(rng: np.random.Generator) -> list[Case]:
    return [((rng.normal(size=(m, n)) * scale).astype(np.float32), np.int64(threads))
            for m, n, threads, scale in _SOFTMAX_SHAPES]


def _softmax(x: np.ndarray, threads: int) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


# ---- launch ------------------------------------------------------------------------------------------------------

MAX_BLOCK, MAX_GRID, MAX_THREADS = (1024, 1024, 64), (2**31 - 1, 65535, 65535), 1024
# (shape, threads): 1 to 3 axes, empty work, one element, odd sizes, block sizes that are not powers of two, and
# work past the grid's caps in x (1-D) and in y and z
_LAUNCH_CASES = [((1,), 256), ((0,), 256), ((1000,), 256), ((33,), 1024), ((10**12,), 32), ((5, 7), 256),
                 ((3, 1000), 128), ((100, 33), 64), ((70000, 3), 1), ((10**6, 10**6), 1024), ((0, 5), 64),
                 ((2, 3, 4), 1024), ((100, 2, 50), 96), ((70000, 1, 1), 1), ((1, 1, 1), 1), ((4, 0, 9), 512),
                 ((9, 9, 9), 64), ((31,), 1)]


def _launch_cases(rng: np.random.Generator) -> list[Case]:
    drawn = [(tuple(int(s) for s in rng.integers(1, 300, size=rng.integers(1, 4))), int(rng.choice([32, 128, 512])))
             for _ in range(4)]
    return [(np.array(shape, dtype=np.int64), np.int64(threads)) for shape, threads in [*_LAUNCH_CASES, *drawn]]


def _check_launch(case: Case, got: tuple) -> str | None:
    shape, threads = [int(s) for s in case[0]], int(case[1])
    said = f"launch_config({tuple(shape)}, {threads})"
    if len(got) != 2 or any(np.shape(g) != (3,) for g in got):
        return f"{said} returned {len(got)} values; expected (grid, block), each three ints (x, y, z)"
    grid, block = ([int(v) for v in g] for g in got)
    if any(not np.issubdtype(np.asarray(g).dtype, np.integer) for g in got):
        return f"{said} = ({tuple(grid)}, {tuple(block)}): grid and block must be ints"
    n = shape[::-1] + [1] * (3 - len(shape))
    for axis, name in enumerate("xyz"):
        g, b = grid[axis], block[axis]
        if b < 1 or g < 1:
            return f"{said}: block {name} = {b} and grid {name} = {g}; every dimension must be at least 1"
        if b > MAX_BLOCK[axis] or g > MAX_GRID[axis]:
            return (f"{said}: block {name} = {b}, grid {name} = {g}, past CUDA's limits (block {MAX_BLOCK[axis]}, "
                    f"grid {MAX_GRID[axis]})")
        if g * b < n[axis] and g != MAX_GRID[axis]:
            return f"{said}: {g} blocks of {b} cover {g * b} of the {n[axis]} elements along {name}"
        if (n[axis] >= 1 and (g - 1) * b >= n[axis]) or (n[axis] == 0 and g != 1):
            return f"{said}: {g} blocks of {b} along {name} for {n[axis]} elements: a block has no work"
    used = block[0] * block[1] * block[2]
    if used > threads:
        return f"{said}: a block of {tuple(block)} is {used} threads, more than {threads}"
    if block[0] < min(32, n[0], threads):
        return f"{said}: block x = {block[0]}: a warp's 32 threads should run along x, the contiguous axis"
    if 2 * used < min(threads, n[0] * n[1] * n[2]):
        return f"{said}: a block of {tuple(block)} uses {used} of the {threads} threads it may have"
    return None


PARTS = {
    "tiled": Part(cases=_tiled_cases, reference=_product, rtol=1e-4, atol=1e-5,
                  traffic=Traffic("sgemm_shared", _traffic_calls, _check_traffic)),
    "softmax": Part(cases=_softmax_cases, reference=_softmax, rtol=1e-5, atol=1e-7),
    "launch": Part(cases=_launch_cases, check=_check_launch),
}
