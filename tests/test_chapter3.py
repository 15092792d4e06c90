"""Chapter 3's pieces: the 03-kernels judge (references against numpy, the solutions notebook against the judge,
plausible wrong kernels rejected) and the chapter's structure. No timing assertions: timings vary by machine."""
from __future__ import annotations

import ast
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

from autograder.judges import judge, write_cases
from autograder.judges.kernels import PARTS, RELU_VIEWS, SPEED_SIZE, SUM_VIEWS, _matmul, _relu, _sum
from teenygrad.grading import GRADING_DIR_ENV
from teenygrad.kernels import cpu
from teenygrad.kernels.jit import JIT_ENABLED

from conftest import notebook_namespace, replacing, run_hidden, solution_cells

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "03-kernels.ipynb"
SOLUTIONS = REPO / "solutions" / "03-kernels.ipynb"
POINTS = {"relu_kernel": 2, "sum_kernel": 2, "blocked_matmul": 3, "blocked_is_faster": 1}
FUNCTION = {"relu_kernel": "relu_kernel", "sum_kernel": "sum_kernel", "blocked_matmul": "blocked_matmul",
            "blocked_is_faster": "fast_blocked_matmul"}

finite = st.floats(-100, 100, allow_nan=False, allow_infinity=False, width=32)


# --- the judge's references against plain numpy -------------------------------------------------------

@st.composite
def arrays_2d_plus(draw, min_side=0):
    shape = tuple(draw(st.lists(st.integers(min_side, 6), min_size=2, max_size=4)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return draw(hnp.arrays(dtype, shape, elements=finite))


@settings(deadline=None, max_examples=60)
@given(arrays_2d_plus())
def test_relu_reference_is_numpy_maximum_on_each_view(x):
    got = _relu(x)
    views = [x, x[::2].T, x[:, ::-1], x[1:, 1:], np.broadcast_to(x[None], (2, *x.shape))]
    assert len(got) == len(views) == len(RELU_VIEWS)
    for g, v in zip(got, views):
        assert g.dtype == x.dtype and g.shape == v.shape
        np.testing.assert_array_equal(g, np.maximum(v, 0))


@settings(deadline=None, max_examples=60)
@given(arrays_2d_plus())
def test_sum_reference_is_numpy_sum_on_each_view(x):
    got = _sum(x)
    want = [x.sum(), x.sum(axis=0), x.sum(axis=-1), x.T.sum(axis=-1), x[::2, ::-1].sum(axis=1)]
    assert len(got) == len(want) == len(SUM_VIEWS)
    for g, w in zip(got, want):
        assert g.dtype == x.dtype and g.shape == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-3)


@settings(deadline=None, max_examples=60)
@given(st.integers(1, 3), st.integers(0, 9), st.integers(0, 9), st.integers(0, 9), st.integers(0, 2**31))
def test_matmul_reference_is_numpy_matmul(batch, m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(batch, m, k)).astype(np.float32)
    b = rng.normal(size=(k, n)).astype(np.float32)
    direct, plain, transposed, batched = _matmul(a, b)
    np.testing.assert_allclose(direct, a[0] @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(plain, a[0] @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(transposed, (a[0] @ b).T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batched, a @ b, rtol=1e-5, atol=1e-5)
    assert all(c.dtype == np.float32 for c in (direct, plain, transposed, batched))


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    shapes = [(a.shape, b.shape) for a, b in PARTS["blocked_matmul"].cases(rng)]
    ks = {b[0] for _, b in shapes}
    assert 0 in ks and 1 in ks  # K = 0 (zeros) and K = 1
    assert any(a[1] == 0 for a, _ in shapes) and any(b[1] == 0 for _, b in shapes)  # M = 0, N = 0
    assert any(a[0] > 1 for a, _ in shapes)  # a batch folded into the rows
    assert any(min(a[1], b[0], b[1]) > 64 for a, b in shapes)  # past any sensible block size
    assert any(x.shape[-1] == 0 for (x,) in PARTS["sum_kernel"].cases(rng))  # a sum over an empty axis
    dtypes = {x.dtype for (x,) in PARTS["relu_kernel"].cases(rng) + PARTS["sum_kernel"].cases(rng)}
    assert dtypes == {np.dtype(np.float32), np.dtype(np.float64)}
    (a, b), = PARTS["blocked_is_faster"].cases(rng)
    assert a.shape == b.shape == (SPEED_SIZE, SPEED_SIZE)


# --- the solutions notebook against the judge ----------------------------------------------------------

def _kernel_without_cache(fn=None, *, parallel=False, fastmath=False):
    """teenygrad.kernels.kernel without the disk cache, which needs a source file (exec'd cells have none)."""
    wrap = numba.njit(parallel=parallel, fastmath=fastmath) if JIT_ENABLED else (lambda f: f)
    return wrap(fn) if fn is not None else wrap


def _notebook_namespace(transform=None) -> tuple[dict, dict]:
    """The solutions notebook's definitions, with numba's disk cache off (exec'd code has no source file)."""
    return notebook_namespace(SOLUTIONS, transform, after_exec=lambda ns: ns.__setitem__("kernel", _kernel_without_cache))


def _run_hidden(namespace: dict, hidden: dict, parts, tmp_path, seed: int) -> dict:
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
        head = solutions[part][:solutions[part].index("### BEGIN SOLUTION")]
        assert f"def {FUNCTION[part]}(" in head


def test_hidden_cells_take_the_judges_views():
    """The hidden cells build the views the judge's references are computed on, in the same order."""
    _, hidden = _notebook_namespace()
    assert "[t, t[::2].T, t[:, ::-1], t[1:, 1:], t.unsqueeze(0).expand(2, *x.shape)]" in hidden["relu_kernel"]
    assert list(RELU_VIEWS) == ["t", "t[::2].T", "t[:, ::-1]", "t[1:, 1:]", "t.unsqueeze(0).expand(2, ...)"]
    assert ("[t.sum(), t.sum(axis=0), t.sum(axis=-1), t.T.sum(axis=-1), t[::2, ::-1].sum(axis=1)]"
            in hidden["sum_kernel"])
    assert list(SUM_VIEWS) == ["t.sum()", "t.sum(axis=0)", "t.sum(axis=-1)", "t.T.sum(axis=-1)",
                               "t[::2, ::-1].sum(axis=1)"]
    assert "return out, (A[0] @ B).numpy(), (B.T @ A[0].T).numpy(), (A @ B).numpy()" in hidden["blocked_matmul"]


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "relu ignores the offset": ("relu_kernel", "pos = x_offset", "pos = 0"),
    "relu walks the buffer flat": ("relu_kernel", "v = x[pos]", "v = x[flat]"),
    "relu keeps negatives": ("relu_kernel", "v if v > 0 else 0", "v if v > -0.5 else 0"),
    "sum ignores the row stride": ("sum_kernel", "base = x_offset + m * sm", "base = x_offset + m * N"),
    "sum ignores the column stride": ("sum_kernel", "acc += x[base + n * sn]", "acc += x[base + n]"),
    "sum leaves empty rows unset": ("sum_kernel", "        out[m] = acc", "        if N > 0:\n            out[m] = acc"),
    "matmul does not zero out (wrong on K = 0)": ("blocked_matmul", "            out[i, j] = 0.0\n",
                                                  "            pass\n"),
    "matmul drops partial blocks (wrong on odd shapes)": ("blocked_matmul", "i1 = min(i0 + BS, M)", "i1 = i0 + BS if i0 + BS <= M else i0"),
    "matmul drops the last partial k block": ("blocked_matmul", "k1 = min(k0 + BS, K)", "k1 = k0 + BS if k0 + BS <= K else k0"),
    "matmul runs j over the whole row in every block": ("blocked_matmul", "for j in range(j0, j1):", "for j in range(j0, N):"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_kernels(mistake, tmp_path, monkeypatch):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace(replacing(part, old, new))
    verdicts = _run_hidden(namespace, hidden, [part], tmp_path, seed=5)
    assert verdicts[part] is not None, mistake


def test_speed_check_needs_the_right_product():
    rng = np.random.default_rng(0)
    case = PARTS["blocked_is_faster"].cases(rng)[0]
    a, b = case
    check = PARTS["blocked_is_faster"].check
    right = (a.astype(np.float64) @ b).astype(np.float32)
    assert check(case, (right,)) is None
    assert "did not compute" in check(case, (np.zeros_like(right),))
    assert "did not compute" in check(case, (right[:-1],))
    assert "reported" in check(case, (right, np.float64(0.001), np.float64(0.01)))


def test_hidden_speed_test_reports_only_the_product(tmp_path, monkeypatch):
    """The notebook reports no timings (its clock could be faked): the grader times the kernel itself
    (autograder/speed.py, tested in tests/test_speed.py)."""
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = _notebook_namespace()
    assert "median_seconds" not in hidden["blocked_is_faster"] and "time" not in hidden["blocked_is_faster"].replace(
        "times fast_blocked_matmul itself", "")
    drawn = write_cases(PARTS, tmp_path, seed=3)
    exec(compile(hidden["blocked_is_faster"], "<hidden>", "exec"), namespace)
    with np.load(tmp_path / "results" / "blocked_is_faster" / "0.npz") as z:
        assert z.files == ["out0"]
        product = z["out0"]
    a, b = drawn["blocked_is_faster"][0]
    np.testing.assert_allclose(product, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
    assert judge(PARTS, drawn, tmp_path)["blocked_is_faster"] is None
    assert PARTS["blocked_is_faster"].speed.function == FUNCTION["blocked_is_faster"]


# --- the chapter -------------------------------------------------------------------------------------------

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
