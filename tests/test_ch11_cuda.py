"""Chapter 11's GPU kernels (teenygrad/kernels/cuda), run in numba-cuda's simulator against numpy.

numba.cuda decides once, when first imported, whether it simulates, and the test workers must not import it at all
(importing teenygrad does not): so every kernel runs in ONE child process with the simulator on (`SIMULATED`
below, a module-scoped fixture), which draws seeded random shapes, including ones that are not multiples of any
tile, one row, one column and K = 1, runs every kernel on them and hands back what the tests check. Small tiles keep
the simulator (every thread a Python thread) at a few seconds.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO

CHILD = r'''
import json, os, sys
os.environ["TEENYGRAD_CUDA"] = "sim"
import numpy as np
import teenygrad.kernels.cuda as gpu
from teenygrad.kernels.cuda import elementwise, launch, matmul, reduce
from teenygrad.kernels.cuda.traffic import Counted

rng = np.random.default_rng(int(sys.argv[1]))
SMALL = {"naive": {"block": 4}, "coalesced": {"block": 4}, "shared": {"tile": 4},
         "blocked_1d": {"BM": 8, "BN": 4, "BK": 3, "TM": 4}, "blocked_2d": {"BM": 8, "BN": 8, "BK": 4, "TM": 4, "TN": 2},
         "vectorised": {"BM": 8, "BN": 8, "BK": 4, "TM": 4, "TN": 2},
         # two warps across, each thread 2 sub-tiles down (WMITER = 2) of 2 x 2 outputs
         "warptiled": {"BM": 16, "BN": 32, "BK": 4, "WM": 16, "WN": 16, "WNITER": 1, "TM": 2, "TN": 2},
         # one warp, each thread 2 sub-tiles across (WNITER = 2) of 4 x 4 outputs: offsets written as 4 * (o // 4)
         "double_buffered": {"BM": 32, "BN": 32, "BK": 3, "WM": 32, "WN": 32, "WNITER": 2, "TM": 4, "TN": 4}}
report = {"simulated": gpu.SIMULATED, "device": gpu.describe(), "sgemm": [], "traffic": {}, "rows": [], "ew": []}
shapes = [(1, 1, 1), (1, 5, 3), (6, 1, 4), (5, 4, 1)] + [tuple(int(s) for s in rng.integers(2, 14, 3)) for _ in range(3)]
for M, K, N in shapes:
    a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
    want = a.astype(np.float64) @ b
    for name, fn in matmul.LADDER:
        out = np.full((M, N), np.nan, np.float32)  # every output must be written
        fn(a, b, out, **SMALL[name])
        report["sgemm"].append([name, [M, K, N], float(np.nanmax(np.abs(out - want))) if np.isfinite(out).all()
                                else None])
M, K, N = 9, 7, 11
a, b = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
for name, fn in matmul.LADDER:
    ca, cb, co = Counted(a), Counted(b), Counted(np.zeros((M, N), np.float32))
    fn(ca, cb, co, **SMALL[name])
    report["traffic"][name] = {"a": ca.loads.tolist(), "b": cb.loads.tolist(), "out_loads": int(co.loads.sum()),
                               "out_stores": co.stores.tolist(), "ok": bool(np.allclose(co.array, a @ b, atol=1e-5))}
for rows, cols, threads, scale in [(1, 1, 1, 1), (3, 37, 16, 1), (2, 64, 32, 1), (4, 9, 8, 80)]:
    x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    sums, soft = np.zeros(rows, np.float32), np.zeros_like(x)
    reduce.sum_rows(x, sums, threads=threads)
    reduce.softmax_rows(x, soft, threads=threads)
    report["rows"].append({"x": x.tolist(), "sum": sums.tolist(), "softmax": soft.tolist()})
# elementwise on strided, broadcast views: a (3, 4) transposed view of a (4, 3) buffer, plus a row broadcast down
base, row = rng.standard_normal(12).astype(np.float32), rng.standard_normal(4).astype(np.float32)
shape = np.array([3, 4], np.int64)
for name in elementwise.BINARY:
    out = np.zeros(12, np.float32)
    gpu.KERNELS[name](shape, base, np.array([1, 3], np.int64), 0, row, np.array([0, 1], np.int64), 0, out)
    report["ew"].append([name, base.tolist(), row.tolist(), out.tolist()])
for name in elementwise.UNARY:
    out = np.zeros(6, np.float32)
    gpu.KERNELS[name](np.array([2, 3], np.int64), base, np.array([6, 2], np.int64), 1, out)  # a strided slice
    report["ew"].append([name, base.tolist(), None, out.tolist()])
# the seam: a kernel swapped in runs, and the old one is back afterwards, even after an error
calls = []
try:
    with gpu.use(add=lambda *args: calls.append("mine")):
        gpu.KERNELS["add"]()
        raise KeyError
except KeyError:
    pass
report["seam"] = [calls, gpu.KERNELS["add"] is elementwise.BINARY["add"]]
try:  # the warp-shuffle sum needs a GPU; in the simulator it names its twin
    reduce.sum_rows_warp(np.ones((2, 64), np.float32), np.zeros(2, np.float32))
    report["warp_sum"] = "ran"
except RuntimeError as error:
    report["warp_sum"] = str(error)
report["configs"] = [[list(s), t, *launch.launch_config(tuple(s), t)] for s, t in
                     [((0,), 256), ((1,), 1), ((70000,), 256), ((5, 3), 64), ((1000, 1000), 1024), ((2, 3, 4), 32),
                      ((70000, 2), 128), ((3, 70000, 1), 512)]]
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def simulated() -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, "11"], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_the_kernels_ran_in_the_simulator(simulated):
    assert simulated["simulated"] and "simulator" in simulated["device"]


def test_every_rung_of_the_ladder_is_numpys_product_on_any_shape(simulated):
    rungs = {name for name, _, _ in simulated["sgemm"]}
    assert rungs == {"naive", "coalesced", "shared", "blocked_1d", "blocked_2d", "vectorised", "warptiled",
                     "double_buffered"}
    for name, (M, K, N), err in simulated["sgemm"]:
        assert err is not None, f"{name} left outputs of a {M}x{K} @ {K}x{N} product unwritten"
        assert err <= 1e-5 * max(1, math.sqrt(K)), (name, (M, K, N), err)


def test_the_loads_each_rung_makes(simulated):
    """Naive and coalesced load every element of a N times and of b M times; shared tiles cut that to the tiles of
    out an element is used by; every output is stored once and never loaded."""
    M, N = 9, 11
    tiles = {"naive": (N, M), "coalesced": (N, M), "shared": (math.ceil(N / 4), math.ceil(M / 4)),
             "blocked_1d": (math.ceil(N / 4), math.ceil(M / 8)), "blocked_2d": (math.ceil(N / 8), math.ceil(M / 8)),
             "vectorised": (math.ceil(N / 8), math.ceil(M / 8)), "warptiled": (math.ceil(N / 32), math.ceil(M / 16)),
             "double_buffered": (math.ceil(N / 32), math.ceil(M / 32))}
    for name, (per_a, per_b) in tiles.items():
        t = simulated["traffic"][name]
        assert t["ok"], name
        assert np.all(np.array(t["a"]) == per_a), (name, t["a"])
        assert np.all(np.array(t["b"]) == per_b), (name, t["b"])
        assert t["out_loads"] == 0 and np.all(np.array(t["out_stores"]) == 1), name
    loads = {name: np.sum(simulated["traffic"][name]["a"]) + np.sum(simulated["traffic"][name]["b"]) for name in tiles}
    assert loads["naive"] > loads["shared"] > loads["blocked_2d"]


def test_row_sums_and_the_stable_softmax(simulated):
    for r in simulated["rows"]:
        x = np.array(r["x"], np.float64)
        np.testing.assert_allclose(r["sum"], x.sum(1), rtol=1e-5, atol=1e-5)
        e = np.exp(x - x.max(1, keepdims=True))  # rows of magnitude ~80 overflow exp without the max
        np.testing.assert_allclose(r["softmax"], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_elementwise_reads_strided_broadcast_views(simulated):
    """(The comparisons and gelu_backward, and the other dtypes, are checked through the op layer against the CPU's
    kernels in test_ch11_gpu_ops.py.)"""
    ops = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
           "pow": np.power, "neg": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh,
           "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "relu": lambda v: np.maximum(v, 0), "abs": np.abs,
           "gelu": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))}
    assert {name for name, *_ in simulated["ew"]} == set(ops)
    for name, base, row, out in simulated["ew"]:
        base = np.array(base, np.float32)
        if row is not None:  # base read as the transpose of a (4, 3) array, row broadcast down its 3 rows
            want = ops[name](base.reshape(4, 3).T, np.array(row, np.float32)[None, :])
        else:  # base[1::2] read as a (2, 3) array with strides (6, 2)
            want = ops[name](np.lib.stride_tricks.as_strided(base[1:], (2, 3), (24, 8)))
        np.testing.assert_allclose(out, want.ravel(), rtol=1e-6, atol=1e-6, err_msg=name)  # nan where numpy's is


def test_the_warp_shuffle_sum_names_its_twin_in_the_simulator(simulated):
    assert "needs a GPU" in simulated["warp_sum"] and "sum_rows" in simulated["warp_sum"]


def test_the_warp_shuffle_sum_on_a_gpu():
    if not os.path.exists("/dev/nvidiactl"):
        pytest.skip("no GPU: warp shuffles do not run in the simulator (sum_rows, its twin, is tested there)")
    code = """
import numpy as np
from teenygrad.kernels.cuda import reduce
rng = np.random.default_rng(0)
for rows, cols, threads in [(1, 1, 32), (3, 37, 64), (5, 1000, 256), (2, 5000, 1024)]:
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    out = np.zeros(rows, np.float32)
    reduce.sum_rows_warp(x, out, threads=threads)
    np.testing.assert_allclose(out, x.astype(np.float64).sum(1), rtol=1e-4, atol=1e-4)
print("ok")
"""
    proc = run(code, TEENYGRAD_CUDA="gpu")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_the_seam_swaps_a_kernel_and_puts_it_back(simulated):
    calls, restored = simulated["seam"]
    assert calls == ["mine"] and restored


def test_launch_configurations_cover_the_work(simulated):
    caps = (2**31 - 1, 65535, 65535)
    for shape, threads, grid, block in simulated["configs"]:
        n = list(reversed(shape)) + [1] * (3 - len(shape))
        assert math.prod(block) <= threads and all(b >= 1 for b in block) and all(1 <= g <= c for g, c in zip(grid, caps))
        for axis in range(3):
            assert grid[axis] * block[axis] >= n[axis] or grid[axis] == caps[axis], (shape, grid, block)
            if n[axis] >= 1:
                assert (grid[axis] - 1) * block[axis] < n[axis], (shape, grid, block)


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


def test_importing_teenygrad_leaves_numba_cuda_alone():
    proc = run("import sys, teenygrad, teenygrad.kernels; print('numba.cuda' in sys.modules)")
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def test_asking_for_a_gpu_without_one_says_what_to_do():
    if os.path.exists("/dev/nvidiactl"):
        pytest.skip("this machine has a GPU")
    proc = run("import teenygrad.kernels.cuda", TEENYGRAD_CUDA="gpu")
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert "TEENYGRAD_CUDA=gpu" in last and "simulator" in last, last
    proc = run("import teenygrad.kernels.cuda", TEENYGRAD_CUDA="cpu")
    assert proc.returncode != 0 and "expected auto, sim or gpu" in proc.stderr


def test_the_kernels_compile_for_a_gpu_without_spilling():
    """What the simulator cannot check: each kernel compiles for an H100/H200 (numba's GPU compiler is stricter:
    e.g. a local array's shape must be a constant), no thread spills registers at the default tiles, and the
    vectorised rungs load shared memory 4 floats at a time. Needs `make gpu`'s CUDA libraries, not a GPU."""
    ptxas = Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "cuda_nvcc" / "bin" / "ptxas"
    if not ptxas.exists():
        pytest.skip("the CUDA libraries are not installed (make gpu)")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu.py"), "--ptx"], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    lines = {line.strip().split("  ")[0]: line for line in proc.stdout.splitlines() if "registers a thread" in line}
    assert len(lines) == 19 and all(" 0 bytes spilled" in line for line in lines.values()), proc.stdout
    for rung in ("vectorised", "warptiled", "double_buffered", "a.T @ b.T", "a @ b.T + bias"):
        assert ", 0 of 1;" in lines[f"sgemm {rung}"] and " 0 of 4 floats" not in lines[f"sgemm {rung}"], proc.stdout


# --- the chapter's figures, from the book build ------------------------------------------------------------------

def test_chapter_figures(book_build):
    glued = json.loads((REPO / "book" / "_build" / "jupyter_execute" / "chapters" / "11-gpu-kernels.glue.json").read_text())
    text = {name: out["data"]["text/plain"].strip("'\"") for name, out in glued.items()}
    fig = {name: float(v) for name, v in text.items() if v.replace(".", "", 1).replace("e-", "").isdigit()}
    assert "simulator" in text["ch11_simulated"] and text["ch11_small_shape"] == "24x16 @ 16x24"
    assert text["ch11_recorded"].startswith("No GPU run is recorded yet")  # benchmarks/results/gpu.json: none yet
    assert fig["ch11_ridge"] == pytest.approx(67 / 4.8, rel=1e-6) and fig["ch11_regs_full"] == 32
    assert fig["ch11_add_blocks"] * 128 >= 1000 > (fig["ch11_add_blocks"] - 1) * 128
    assert (fig["ch11_seg_row"], fig["ch11_seg_col"], fig["ch11_tree_rounds"]) == (1, 32, 4)
    # measured loads in the simulator are the formulas': naive M*K*N twice, 8-wide tiles an eighth of that
    assert fig["ch11_loads_naive"] == 2 * 24 * 16 * 24 and fig["ch11_loads_shared"] == 2 * 24 * 16 * 3
    assert fig["ch11_loads_ratio"] == pytest.approx(8)
    assert fig["ch11_int_naive"] == pytest.approx(0.25) and fig["ch11_int_shared"] == pytest.approx(8)
    assert fig["ch11_int_2d"] == pytest.approx(16) and fig["ch11_int_2d"] > fig["ch11_ridge"] > fig["ch11_int_shared"]
    assert 100 < fig["ch11_launches"] < 1000  # chapter 9's 4-layer step on the GPU's table: each call a launch
    # its copies, as the prose lists them: none to the GPU; back, 3 index checks, the loss's scale, the clipping, the loss
    assert (fig["ch11_copies_to"], fig["ch11_copies_back"]) == (0, 6)
    # the same GPT step on both devices: the losses and the weights after it agree to float32 rounding
    assert float(text["ch11_step_loss_diff"]) < 1e-5 and float(text["ch11_step_weight_diff"]) < 1e-4
    assert text["ch11_training"].startswith("No GPU training run is recorded yet")
