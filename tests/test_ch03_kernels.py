"""Chapter 3's pieces: the 03-kernels judge (references against numpy, the solutions notebook against the judge,
plausible wrong kernels rejected), teenygrad's blocked matmul and sum kernel against numpy, and the chapter's
structure. No timing assertions: timings vary by machine."""
from __future__ import annotations

import ast
import contextlib
import importlib
import json
import re
from pathlib import Path

import nbformat
import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teenygrad as tg
from autograder.judges.kernels import (
    BINARY_VIEWS,
    MAX_VIEWS,
    PARTS,
    SPEED_SIZE,
    SUM_VIEWS,
    _binary,
    _max,
    _sum,
    one_k_at_a_time,
    tiles,
)
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.kernels import blocked, cpu
from teenygrad.kernels.jit import JIT_ENABLED

from conftest import notebook_namespace, replacing, run_hidden, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "03-kernels.ipynb"
SOLUTIONS = REPO / "solutions" / "03-kernels.ipynb"
POINTS = {"binary": 2, "sum_rows": 2, "max_rows": 2, "matmul_blocked": 2, "matmul_tile": 2}
FUNCTIONS = {"binary": ("sub", "div", "maximum", "compare"), "sum_rows": ("sum_rows",),
             "max_rows": ("max_rows", "argmax_rows"), "matmul_blocked": ("matmul_blocked",),
             "matmul_tile": ("matmul_tile",)}

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32)


# --- teenygrad's pieces against numpy ------------------------------------------------------------------------

@settings(deadline=None, max_examples=40)
@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 40), st.integers(1, 9), st.integers(1, 9),
       st.integers(1, 9), st.integers(0, 2**31))
def test_blocked_matmul_is_the_reordered_product_bit_for_bit(m, k, n, bi, bk, bj, seed):
    """Any block sizes: the product, with the reordered kernel's arithmetic (the same bits, k in order)."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(m, k)).astype(np.float32)
    b = rng.normal(size=(k, n)).astype(np.float32)
    out = np.full((m, n), np.nan, np.float32)
    blocked.matmul_blocked(a, b, out, bi, bk, bj)
    np.testing.assert_array_equal(out, one_k_at_a_time(a, b, np.zeros((m, n), np.float32), (0, m, 0, k, 0, n)))
    if m and n:
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_blocked_matmul_calls_the_tile_kernel_once_per_tile():
    seen = []

    def matmul_tile(a, b, out, i0, i1, k0, k1, j0, j1):
        seen.append((i0, i1, k0, k1, j0, j1))
        out[i0:i1, j0:j1] += a[i0:i1, k0:k1] @ b[k0:k1, j0:j1]

    a, b = np.ones((7, 5), np.float32), np.ones((5, 9), np.float32)
    with tg.edition.installed("03-kernels", "matmul_tile", matmul_tile):
        blocked.matmul_blocked(a, b, np.empty((7, 9), np.float32), 3, 2, 4)
    assert seen == tiles(7, 5, 9, 3, 2, 4) and len(seen) == 3 * 3 * 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tile_kernel_touches_only_its_tile(dtype):
    rng = np.random.default_rng(4)
    a, b, out = (rng.normal(size=s).astype(dtype) for s in ((9, 8), (8, 7), (9, 7)))
    for bounds in [(0, 9, 0, 8, 0, 7), (2, 5, 1, 6, 3, 7), (4, 4, 0, 8, 0, 7), (0, 9, 3, 3, 0, 7)]:
        got = out.copy()
        blocked.matmul_tile(a, b, got, *bounds)
        np.testing.assert_array_equal(got, one_k_at_a_time(a, b, out, bounds))


@settings(deadline=None, max_examples=40)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.integers(0, 2**31))
def test_sum_kernel_on_strided_views_is_numpy(shape, seed):
    """KERNELS["sum"] (reduce.sum_rows) through Tensor.sum on flipped, stepped and transposed views."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(np.float32)
    t = tg.tensor(x)
    for view, nview in [(t, x), (t[::-1], x[::-1]), (t[::2], x[::2]), (t.T, x.T)]:
        for axis in [None, *range(x.ndim)]:
            np.testing.assert_allclose(view.sum(axis=axis).numpy(), nview.astype(np.float64).sum(axis=axis),
                                       rtol=1e-5, atol=1e-5)
    assert tg.kernels.KERNELS["sum"] is tg.kernels.reduce.sum_rows


@settings(deadline=None, max_examples=30)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=3), st.integers(0, 2**31))
def test_binary_and_max_kernels_on_strided_views_are_numpy(shape, seed):
    """The binary family (exercise 3's part binary) and max/argmax (part max_rows) through Tensor ops on views."""
    rng = np.random.default_rng(seed)
    x = np.where(rng.random(shape) < 0.3, rng.integers(-1, 2, size=shape), rng.normal(size=shape)).astype(np.float32)
    y = rng.normal(size=shape[-1:]).astype(np.float32)
    t, s = tg.tensor(x), tg.tensor(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        for got, want in [(t[::-1] - s, x[::-1] - y), (t / s[::-1], x / y[::-1]), (1.0 / t.T, 1.0 / x.T),
                          (t.maximum(s), np.maximum(x, y)), (t < s, x < y), (t != t[::-1], x != x[::-1]),
                          (t.max(axis=0), x.max(axis=0)), (t.T.argmax(axis=-1), x.T.argmax(axis=-1))]:
            np.testing.assert_array_equal(got.numpy(), np.asarray(want).astype(got.numpy().dtype))
    assert tg.kernels.KERNELS["max"] is tg.kernels.reduce.max_rows and tg.kernels.KERNELS["sub"] is tg.kernels.elementwise.sub


# --- the judge's references against plain numpy -------------------------------------------------------

@settings(deadline=None, max_examples=60)
@given(hnp.arrays(np.float32, st.lists(st.integers(0, 6), min_size=2, max_size=4).map(tuple), elements=finite))
def test_sum_reference_is_numpy_sum_on_each_view(x):
    got = _sum(x)
    want = [x.sum(), x.sum(axis=0), x.sum(axis=-1), x.T.sum(axis=-1), x[::2, ::-1].sum(axis=1)]
    assert len(got) == len(want) == len(SUM_VIEWS)
    for g, w in zip(got, want):
        assert g.dtype == x.dtype and g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-3)


def test_binary_and_max_references_are_numpy_on_each_view():
    rng = np.random.default_rng(3)
    for x, y in PARTS["binary"].cases(rng):
        got = _binary(x, y)
        assert len(got) == len(BINARY_VIEWS) and all(g.dtype == x.dtype for g in got)
        by_name = dict(zip(BINARY_VIEWS, got))
        with np.errstate(divide="ignore", invalid="ignore"):
            np.testing.assert_array_equal(by_name["t / s.T"], x / y.T)
            np.testing.assert_array_equal(by_name["t.abs() ** s.T"], (np.abs(x) ** y.T).astype(x.dtype))
        np.testing.assert_array_equal(by_name["t * s.T"], x * y.T)
        np.testing.assert_array_equal(by_name["t == s.T"], (x == y.T).astype(x.dtype))
    for (x,) in PARTS["max_rows"].cases(rng):
        got = _max(x)
        assert len(got) == len(MAX_VIEWS)
        np.testing.assert_array_equal(got[1], x.max(axis=0))
        np.testing.assert_array_equal(got[7], x[:, ::-1].argmax(axis=1))


def test_one_k_at_a_time_is_the_definition():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(6, 5)), rng.normal(size=(5, 4))
    out = one_k_at_a_time(a, b, np.zeros((6, 4)), (0, 6, 0, 5, 0, 4))
    np.testing.assert_allclose(out, a @ b, rtol=1e-12)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    assert one_k_at_a_time(a32, b32, np.zeros((6, 4), np.float32), (0, 6, 0, 5, 0, 4)).dtype == np.float32


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    blocked_cases = [(a.shape, b.shape, tuple(bl)) for a, b, bl in PARTS["matmul_blocked"].cases(rng)]
    assert any(b[0] == 0 for _, b, _ in blocked_cases)  # K = 0: no tile, out all zeros
    assert any(a[0] == 0 for a, _, _ in blocked_cases) and any(b[1] == 0 for _, b, _ in blocked_cases)
    # block sizes that leave partial blocks in every direction, and blocks larger than the matrix
    assert any(a[0] % bl[0] and a[1] % bl[1] and b[1] % bl[2] for a, b, bl in blocked_cases)
    assert any(bl[0] > a[0] for a, _, bl in blocked_cases)
    bounds = [tuple(c[3]) for c in PARTS["matmul_tile"].cases(rng)]
    assert any(i0 == i1 for i0, i1, *_ in bounds) and any(k0 == k1 for _, _, k0, k1, _, _ in bounds)
    assert {c[2].dtype for c in PARTS["matmul_tile"].cases(rng)} == {np.dtype(np.float32), np.dtype(np.float64)}
    assert any(x.shape[-1] == 0 for (x,) in PARTS["sum_rows"].cases(rng))  # a sum over an empty axis
    binary = PARTS["binary"].cases(rng)  # zeros, signed zeros, infinities and nans among the operands of each dtype
    for dtype in (np.float32, np.float64):
        y = np.concatenate([y.ravel() for _, y in binary if y.dtype == dtype])
        assert np.isnan(y).any() and np.isinf(y).any() and (np.signbit(y) & (y == 0)).any()
    maxes = [x for (x,) in PARTS["max_rows"].cases(rng)]
    assert any(np.isnan(x).any() for x in maxes if x.dtype.kind == "f") and any(x.dtype == np.int64 for x in maxes)
    a, b, out = PARTS["matmul_tile"].speed.arguments(rng)
    assert a.shape == b.shape == out.shape == (SPEED_SIZE, SPEED_SIZE)


# --- the solutions notebook against the judge ----------------------------------------------------------

def _kernel_without_cache(fn=None, *, parallel=False, fastmath=False):
    """teenygrad.kernels.kernel without the disk cache, which needs a source file (exec'd cells have none)."""
    wrap = numba.njit(parallel=parallel, fastmath=fastmath) if JIT_ENABLED else (lambda f: f)
    return wrap(fn) if fn is not None else wrap


def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    """The solutions notebook's definitions, with numba's disk cache off (exec'd code has no source file)."""
    return notebook_namespace(SOLUTIONS, transform, after_exec=lambda ns: ns.__setitem__("kernel", _kernel_without_cache))


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
    """The hidden tests, with the notebook's functions installed in teenygrad (as its test cells do first)."""
    with contextlib.ExitStack() as stack:
        for part in PARTS:
            stack.enter_context(tg.edition.installed("03-kernels", part, *(namespace[f] for f in FUNCTIONS[part])))
        return run_hidden(PARTS, namespace, hidden, parts, tmp_path, seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    verdicts = _run_hidden(namespace, hidden, PARTS, tmp_path, seed)
    assert verdicts == {part: None for part in PARTS}


def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        assert f'report("{part}", ' in hidden and "assert" not in hidden
        # the function is defined outside the solution markers, so a released exercise still defines it
        for name in FUNCTIONS[part]:
            head = solutions[part][:solutions[part].index(f"def {name}(")]
            assert f"def {name}(" in solutions[part] and "### BEGIN SOLUTION" not in head.split("@kernel")[-1]


def test_hidden_cells_take_the_judges_views():
    """The hidden cells build the views the judge's references are computed on, in the same order."""
    _, hidden = _notebook_namespace()
    assert ("[t.sum(), t.sum(axis=0), t.sum(axis=-1), t.T.sum(axis=-1), t[::2, ::-1].sum(axis=1)]"
            in hidden["sum_rows"])
    assert list(SUM_VIEWS) == ["t.sum()", "t.sum(axis=0)", "t.sum(axis=-1)", "t.T.sum(axis=-1)",
                               "t[::2, ::-1].sum(axis=1)"]
    binary = hidden["binary"]
    assert "[" + ", ".join(BINARY_VIEWS) + "]" in " ".join(binary.split()).replace("[ ", "[")
    assert "[" + ", ".join(MAX_VIEWS) + "]" in " ".join(hidden["max_rows"].split()).replace("[ ", "[")
    # the blocked launcher runs on the grader's recording tile kernel, never on the learner's
    assert 'tg.edition.installed("03-kernels", "matmul_tile", matmul_tile)' in hidden["matmul_blocked"]


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "sub ignores the strides of b": ("binary", "a[u(ia + j * sa)] - b[u(ib + j * sb)]", "a[u(ia + j * sa)] - b[u(ib + j)]"),
    "sub finds rows of b with a's strides": ("binary", "ib = row_start(r, shape, b_strides, b_offset)\n        for j in range(n):\n"
                                             "            out[u(r * n + j)] = a[u(ia + j * sa)] - b",
                                             "ib = row_start(r, shape, a_strides, b_offset)\n        for j in range(n):\n"
                                             "            out[u(r * n + j)] = a[u(ia + j * sa)] - b"),
    "div with a plain / (0 / 0 raises or is not nan)": ("binary", "safe_div(a[u(ia + j * sa)], b[u(ib + j * sb)])",
                                                      "a[u(ia + j * sa)] / (b[u(ib + j * sb)] + 1e-30)"),
    "maximum loses nan": ("binary", "p if p >= q or p != p else q", "p if p >= q else q"),
    "compare swaps < and <=": ("binary", "hit = p < q", "hit = p <= q"),
    "compare with nan is true for ==": ("binary", "hit = p == q", "hit = not (p < q or p > q)"),
    "max ignores nan": ("max_rows", "                out[m] = np.nan\n    else", "                pass\n    else"),
    "max in the swapped loops forgets the offset": ("max_rows", "base = x_offset + n * sn", "base = n * sn"),
    "argmax takes the last of equals": ("max_rows", "if v > best:\n                    best, where", "if v >= best:\n                    best, where"),
    "argmax skips nan": ("max_rows", "                if v != v:\n                    where = n\n                    break\n", ""),
    "sum ignores the row stride": ("sum_rows", "base = x_offset + m * sm", "base = x_offset + m * N"),
    "sum ignores the column stride": ("sum_rows", "total += x[base + n * sn]", "total += x[base + n]"),
    "sum leaves empty rows unset": ("sum_rows", "            out[m] = total", "            if N > 0:\n                out[m] = total"),
    "sum in the swapped loops forgets the offset": ("sum_rows", "base = x_offset + n * sn", "base = n * sn"),
    "blocked does not zero out (wrong on K = 0)": ("matmul_blocked", "    out[...] = 0\n", "    pass\n"),
    "blocked drops partial blocks": ("matmul_blocked", "i1 = min(i0 + block_i, M)", "i1 = i0 + block_i if i0 + block_i <= M else i0"),
    "blocked in one piece": ("matmul_blocked", "    for i0 in range(0, M, block_i):",
                             "    blocked.matmul_tile(a, b, out, 0, M, 0, K, 0, N)\n    for i0 in range(0, 0, block_i):"),
    "blocked ignores block_k": ("matmul_blocked", "k1 = min(k0 + block_k, K)", "k1 = K"),
    "tile with a float64 accumulator": ("matmul_tile", "    for i in range(i0, i1):\n        out_row = out[i, j0:j1]",
                                        "    for i in range(i0, i1):\n        out_row = out[i, j0:j1].astype(np.float64)"),
    "tile overwrites instead of adding": ("matmul_tile", "out_row[j] += aik * b_row[j]", "out_row[j] = aik * b_row[j]"),
    "tile runs past its rows": ("matmul_tile", "for i in range(i0, i1):", "for i in range(i0, out.shape[0]):"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_kernels(mistake, tmp_path, monkeypatch):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(replacing(part, old, new))
    verdicts = _run_hidden(namespace, hidden, [part], tmp_path, seed=5)
    assert verdicts[part] is not None, mistake


def test_judge_rejects_a_numpy_tile(tmp_path, monkeypatch):
    """numpy's a @ b (BLAS: another order of additions) is right to rounding but not the contract's bits."""
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()

    def matmul_tile(a, b, out, i0, i1, k0, k1, j0, j1):
        out[i0:i1, j0:j1] += a[i0:i1, k0:k1] @ b[k0:k1, j0:j1]

    namespace["matmul_tile"] = matmul_tile
    verdict = _run_hidden(namespace, hidden, ["matmul_tile"], tmp_path, seed=6)["matmul_tile"]
    assert verdict is not None and "bit for bit" in verdict


def test_hidden_speed_test_reports_only_the_tile(tmp_path, monkeypatch):
    """The notebook reports no timings (its clock could be faked): the grader times the kernel itself
    (autograder/speed.py, tested in tests/test_speed.py)."""
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    _, hidden = _notebook_namespace()
    assert "median_seconds" not in hidden["matmul_tile"] and "perf_counter" not in hidden["matmul_tile"]
    assert PARTS["matmul_tile"].speed.function == "tile_product"
    assert "def tile_product(a, b, out):" in nbformat.read(SOLUTIONS, as_version=4).cells[1].source


# The chapter's structure (title, headings, no outputs, exercise link): tests/test_notebooks.py


def test_every_figure_in_the_prose_is_glued_by_the_code():
    """The prose states measured figures only through {glue:text}`name`; each name is glued by a code cell."""
    nb = nbformat.read(CHAPTER, as_version=4)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "".join(c.source for c in nb.cells if c.cell_type == "code")
    used = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)", prose))
    glued = set(re.findall(r'glue\("([a-z0-9_]+)"', code)) | {
        f"ch3_gflops_{name}" for name in ("naive", "reordered", "blocked", "tiled", "parallel", "default", "numpy")
        if 'glue(f"ch3_gflops_{name}"' in code}
    assert used, "the chapter should state its measurements through glue"
    assert used <= glued, f"stated but never glued: {sorted(used - glued)}"


def test_chapter_kernels_agree_with_teenygrad():
    """The chapter's own kernels (exec'd from its code cells) against teenygrad's, without timing anything."""
    nb = nbformat.read(CHAPTER, as_version=4)
    namespace: dict = {}
    exec("import importlib, inspect, time\nimport numba\nimport numpy as np\n"
         "mm = importlib.import_module('teenygrad.kernels.matmul')", namespace)
    wanted = {"matmul_ijk", "matmul_ikj", "add_numba", "sum_numba"}
    for cell in nb.cells:  # only the function definitions, not the timing code around them
        if cell.cell_type == "code":
            defs = [node for node in ast.parse(cell.source).body
                    if isinstance(node, ast.FunctionDef) and node.name in wanted]
            exec(compile(ast.Module(body=defs, type_ignores=[]), "<chapter cell>", "exec"), namespace)
    assert wanted <= set(namespace)
    rng = np.random.default_rng(1)
    for m, k, n in [(1, 1, 1), (5, 0, 3), (17, 9, 33)]:
        a = rng.normal(size=(m, k)).astype(np.float32)
        b = rng.normal(size=(k, n)).astype(np.float32)
        for name in ("matmul_ijk", "matmul_ikj"):
            out = np.full((m, n), np.nan, np.float32)
            namespace[name](a, b, out)
            np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)
    x = rng.normal(size=1000).astype(np.float32)
    out = np.empty_like(x)
    namespace["add_numba"](x, x, out)
    np.testing.assert_array_equal(out, x + x)
    assert np.isclose(namespace["sum_numba"](x), x.astype(np.float64).sum(), rtol=1e-6)


# --- the machine: the chapter states what the build detects and measures, never one machine's figures ----------

# Phrases that describe one particular processor; the chapter glues these facts from teenygrad/kernels/cpu.py.
ONE_MACHINE = ["Zen", "zmm", "ymm", "EPYC", "2-core", "MiB L2", "MiB L3", "KiB L1", "AVX-512 instructions", "of the 32"]


def test_hardware_prose_is_detected_not_typed():
    nb = nbformat.read(CHAPTER, as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not [p for p in ONE_MACHINE if p in prose], "glue hardware facts from cpu.host() instead"
    assert "machine = cpu.host()" in code
    for name, source in [("ch3_isa", "vector.isa"), ("ch3_registers", "vector.registers"), ("ch3_lanes", "lanes"),
                         ("ch3_l2", 'cache_text("L2")'), ("ch3_mr", "mm.MR"), ("ch3_nr", "mm.NR"),
                         ("ch3_stream_gain", "gain")]:
        assert f'glue("{name}", {source},' in code, name
    # the peak-FLOPS loop is the micro-kernel's shape on this machine, not a fixed 6 x 32
    assert "NR = mm.NR" in code and "range(32)" not in code


def _book_glue(chapter: str) -> dict:
    """Every value a chapter glued in the book build, numbers and strings alike."""
    glue_file = REPO / "book" / "_build" / "jupyter_execute" / "chapters" / f"{chapter}.glue.json"
    return {name: ast.literal_eval(out["data"]["text/plain"]) for name, out in json.loads(glue_file.read_text()).items()}


def check_machine_figures(fig: dict) -> None:
    """The chapter's glued facts about the machine agree with teenygrad's detection, and its measured thread
    figures with each other (the timings themselves are not asserted: they vary by machine and load)."""
    mm = importlib.import_module("teenygrad.kernels.matmul")
    host = cpu.host()
    v = host.vector
    assert (fig["ch3_isa"], fig["ch3_registers"], fig["ch3_vector_bits"]) == (v.isa, v.registers, v.bits)
    assert fig["ch3_lanes"] == v.bits // 32 and fig["ch3_lanes64"] == v.bits // 64
    assert fig["ch3_fma"] == ("has" if v.fma else "does not have") and fig["ch3_cores"] == host.cores
    for level in ("L1d", "L2", "L3"):
        want = cpu.format_bytes(host.cache(level)) if host.cache(level) else "an unknown amount"
        assert fig[f"ch3_{level.lower()}"] == want, level
    assert fig["ch3_cache_line"] == (host.cache_line or 64)
    # the micro-kernel: its shape, and the registers it takes
    assert (fig["ch3_mr"], fig["ch3_nr"]) == (mm.MR, mm.NR) == cpu.micro_kernel_shape(v)
    assert fig["ch3_accumulators"] == mm.MR * mm.NR // v.float32_lanes <= v.registers
    assert fig["ch3_block_madds"] == mm.MR * mm.NR
    assert fig["ch3_panel_size"] == cpu.format_bytes(4 * mm.KC * mm.NR) and fig["ch3_kc"] == mm.KC
    # array sizes: the bandwidth test's arrays are at least four times the last-level cache
    llc = host.cache(host.last_level_cache() or "") or 0
    assert fig["ch3_stream_mib"] * 2**20 >= max(128 * 2**20, 4 * llc)
    assert fig["ch3_add_mib"] == 4 * fig["ch3_side"] ** 2 / 2**20
    # one thread against all of them: the ratio and the sentence follow from the two measurements
    assert fig["ch3_threads"] >= 1 and fig["ch3_stream_one"] > 0 and fig["ch3_stream_all"] > 0
    gain = fig["ch3_stream_gain"]
    assert gain == pytest.approx(fig["ch3_stream_all"] / fig["ch3_stream_one"], rel=1e-9)
    if fig["ch3_threads"] == 1:
        assert "one thread" in fig["ch3_stream_verdict"]
    else:
        verdict = fig["ch3_stream_verdict"]
        assert ("slower" in verdict) == (gain < 0.95)
        assert ("almost nothing" in verdict) == (0.95 <= gain < 1.2)
        assert ("a little" in verdict) == (1.2 <= gain < 1.6)
        assert ("a good deal" in verdict) == (gain >= 1.6)
    assert fig["ch3_flops_512"] == pytest.approx(2 * 512**3 / 1e6)


def test_machine_figures_from_the_build(book_build):
    check_machine_figures(_book_glue("03-kernels"))
