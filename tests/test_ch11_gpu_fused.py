"""Chapter 11's op-layer GPU kernels (teenygrad/kernels/cuda: matmul, matmul_batched, the fused transformer ops and
their backward, the optimizers' updates and clipping), run through Tensors on device="cuda" in numba-cuda's simulator
against the same computation on the CPU.

As in test_ch11_cuda.py, numba.cuda decides once, when first imported, whether it simulates, and the test workers
must not import it: so everything runs in ONE child process with TEENYGRAD_CUDA=sim (a module-scoped fixture), which
builds Tensors on "cuda" and on "cpu" from the same seeded random data, runs the same ops, forward and backward,
on both, and hands back both results for the tests to compare. Shapes are small (every simulated thread is a Python
thread) but include sizes that are not multiples of any tile, size-1 dims, K = 1 and rows longer than a block.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

CHILD = r'''
import json, os, sys
os.environ["TEENYGRAD_CUDA"] = "sim"
# The simulator's launcher polls its block's threads in a busy loop that holds the GIL until Python's switch
# interval (5 ms) ends, at every syncthreads and thread exit: a shorter interval makes the whole file ~5x faster
sys.setswitchinterval(5e-5)
import numpy as np
import teenygrad as tg
import teenygrad.functional as F
from teenygrad import kernels
import teenygrad.kernels.cuda as gpu
from teenygrad.kernels.cuda import reduce
from teenygrad.kernels.cuda.device import cuda

report = {"simulated": gpu.SIMULATED, "cases": []}


rng = np.random.default_rng(int(sys.argv[1]))


def both(arr, grad=False):
    """The same numbers as a CPU tensor and a GPU tensor."""
    return (tg.tensor(arr, dtype=arr.dtype, requires_grad=grad),
            tg.tensor(arr, dtype=arr.dtype, requires_grad=grad, device="cuda"))


def rand(shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def case(name, dtype, cpu, gpu_values, devices=None):
    """cpu, gpu_values: lists of tensors (or numbers) in the same order."""
    report["cases"].append({"name": name, "dtype": np.dtype(dtype).name,
                            "cpu": [np.asarray(t.numpy() if hasattr(t, "numpy") else t).tolist() for t in cpu],
                            "gpu": [np.asarray(t.numpy() if hasattr(t, "numpy") else t).tolist() for t in gpu_values],
                            "devices": devices or [t.device for t in gpu_values if hasattr(t, "device")]})


def run_graph(name, dtype, arrays, fn):
    """fn(*tensors) on each device, then backward with one seeded upstream gradient; (out, grads) compared."""
    results = []
    g = None
    for device in (0, 1):
        ts = [both(a, grad=True)[device] for a in arrays]
        out = fn(*ts)
        if g is None:
            g = rand(out.shape, dtype)
        out.backward(tg.tensor(g, dtype=dtype, device=out.device))
        results.append([out] + [t.grad for t in ts])
    case(name, dtype, results[0], results[1])


# ---- products: 2-D (ladder for float32, tiled for float64), transposed operands, batches ------------------------
shapes = [(1, 1, 1), (1, 5, 3), (6, 1, 4), (5, 4, 1)] + [tuple(int(s) for s in rng.integers(2, 40, 3)) for _ in range(2)]
for dtype in (np.float32, np.float64):
    for M, K, N in shapes:
        run_graph(f"matmul {M}x{K}@{K}x{N}", dtype, [rand((M, K), dtype), rand((K, N), dtype)], lambda a, b: a @ b)
    run_graph("matmul a.T @ b", dtype, [rand((7, 5), dtype), rand((7, 9), dtype)], lambda a, b: a.T @ b)
    run_graph("matmul a @ b.T", dtype, [rand((3, 6), dtype), rand((11, 6), dtype)], lambda a, b: a @ b.T)
    run_graph("batched (3,5,4)@(3,4,6)", dtype, [rand((3, 5, 4), dtype), rand((3, 4, 6), dtype)], lambda a, b: a @ b)
    run_graph("batched (2,1,7)@(2,7,1)", dtype, [rand((2, 1, 7), dtype), rand((2, 7, 1), dtype)], lambda a, b: a @ b)
    run_graph("batched transposed", dtype, [rand((2, 3, 5), dtype), rand((2, 6, 5), dtype)],
              lambda a, b: a @ b.transpose(-1, -2))
    run_graph("batch folded into rows (2,3,5)@(5,4)", dtype, [rand((2, 3, 5), dtype), rand((5, 4), dtype)],
              lambda a, b: a @ b)
for dtype in (np.float32, np.float64):  # K = 0: zeros
    outs = [both(np.zeros((3, 0), dtype))[d] @ both(np.zeros((0, 4), dtype))[d] for d in (0, 1)]
    case("matmul K=0", dtype, [outs[0]], [outs[1]])
# transposed operands read in place (float32: the top rung takes a transpose's storage), on shapes past one tile
for M, K, N in [tuple(int(s) for s in rng.integers(20, 75, 3)) for _ in range(2)]:
    run_graph(f"matmul a.T @ b.T {M}x{K}@{K}x{N}", np.float32, [rand((K, M)), rand((N, K))], lambda a, b: a.T @ b.T)
    run_graph(f"matmul a @ b.T {M}x{K}@{K}x{N}", np.float32, [rand((M, K)), rand((N, K))], lambda a, b: a @ b.T)
from teenygrad.kernels.cuda.launch import counted_launches

xa, xb = both(rand((33, 40)))[1], both(rand((50, 40)))[1]
with counted_launches() as counts:
    xa @ xb.T, xa.T @ xa
report["transposed_launches"] = dict(counts)
bias = both(rand(50))[1]
with counted_launches() as counts:
    F.linear(xa, xb, bias)  # (33, 40) @ (50, 40).T + (50,)
report["linear_launches"] = dict(counts)

# ---- fused ops, forward and backward -----------------------------------------------------------------------------
for dtype in (np.float32, np.float64):
    run_graph("linear with bias", dtype, [rand((2, 3, 5), dtype), rand((4, 5), dtype), rand(4, dtype)],
              lambda x, w, b: F.linear(x, w, b))
    run_graph("linear 1 row, 1 output", dtype, [rand((1, 6), dtype), rand((1, 6), dtype), rand(1, dtype)],
              lambda x, w, b: F.linear(x, w, b))
    if dtype == np.float32:  # past one tile of the top rung (32 x 32 in the simulator), whose epilogue adds the bias
        rows, n_in, n_out = (int(s) for s in rng.integers(33, 41, 3))
        run_graph(f"linear {rows}x{n_in} -> {n_out}", dtype, [rand((rows, n_in), dtype), rand((n_out, n_in), dtype),
                                                              rand(n_out, dtype)], lambda x, w, b: F.linear(x, w, b))
    arrays = (np.zeros((3, 0), dtype), np.zeros((4, 0), dtype), rand(4, dtype))
    outs = [F.linear(*(both(a)[d] for a in arrays)) for d in (0, 1)]
    case("linear K=0: the bias alone", dtype, [outs[0]], [outs[1]])
    for shape in [(2, 3, 37), (5, 1), (1, 7), (4, 70)]:
        C = shape[-1]
        run_graph(f"layer_norm {shape}", dtype, [rand(shape, dtype), 1 + rand(C, dtype) / 4, rand(C, dtype)],
                  lambda x, w, b: F.layer_norm(x, w, b))
        run_graph(f"rms_norm {shape}", dtype, [rand(shape, dtype), 1 + rand(C, dtype) / 4],
                  lambda x, w: F.rms_norm(x, w))
    for B, T, nh, hs in [(2, 5, 2, 3), (1, 1, 1, 4), (1, 35, 1, 2), (2, 3, 3, 1)]:
        run_graph(f"attention B={B} T={T} nh={nh} hs={hs}", dtype, [rand((B, T, 3 * nh * hs), dtype)],
                  lambda qkv: F.causal_self_attention(qkv, nh))
    # the probabilities themselves: 0 above the diagonal, rows summing to 1
    qkv = both(rand((2, 6, 12), dtype))[1]
    y, att = tg.zeros(2, 6, 4, dtype=dtype, device="cuda"), tg.zeros(2, 2, 6, 6, dtype=dtype, device="cuda")
    att_dev = att._buf.reshape(2, 2, 6, 6)
    att_dev.copy_to_device(np.full((2, 2, 6, 6), np.nan, dtype))  # every position must be written
    gpu.KERNELS["attention"](qkv._buf.reshape(2, 6, 12), 2, y._buf.reshape(2, 6, 4), att_dev)
    report.setdefault("att", []).append(att_dev.copy_to_host().tolist())

# ---- grids smaller than the work: the kernels' grid-stride loops cover the rest -----------------------------------
from teenygrad.kernels.cuda import fused as gpu_fused, optim as gpu_optim, products as gpu_products
gpu_fused.MAX_BLOCKS, gpu_products.GRID_CAP, gpu_optim.PARTIALS = 2, 1, 2
run_graph("small grid: batched (3,9,4)@(3,4,6)", np.float64, [rand((3, 9, 4), np.float64), rand((3, 4, 6), np.float64)],
          lambda a, b: a @ b)
run_graph("small grid: layer_norm (5, 11)", np.float32, [rand((5, 11)), 1 + rand(11) / 4, rand(11)],
          lambda x, w, b: F.layer_norm(x, w, b))
run_graph("small grid: rms_norm (5, 11)", np.float32, [rand((5, 11)), 1 + rand(11) / 4], lambda x, w: F.rms_norm(x, w))
run_graph("small grid: attention", np.float32, [rand((1, 4, 6))], lambda qkv: F.causal_self_attention(qkv, 1))
big = rand(300)
case("small grid: sum_of_squares", np.float32, [float((big.astype(np.float64) ** 2).sum())],
     [gpu.KERNELS["sum_of_squares"](cuda.to_device(big))], ["cuda"])
gpu_fused.MAX_BLOCKS, gpu_products.GRID_CAP, gpu_optim.PARTIALS = 65535, 65535, 8

# ---- optimizers: two steps on each device from the same parameters and gradients ---------------------------------
def opt_case(name, make, dtype=np.float32, clip=None):
    values = [rand((3, 4), dtype), rand(5, dtype), rand(1, dtype)]
    grads = [[rand(v.shape, dtype) for v in values] for _ in range(2)]
    results, norms = [], []
    for device in ("cpu", "cuda"):
        params = [tg.tensor(v, dtype=dtype, requires_grad=True, device=device) for v in values]
        opt = make(params)
        for step in range(2):
            for p, g in zip(params, grads[step]):
                p.grad = tg.tensor(g * (10 if clip else 1), dtype=dtype, device=device)
            if clip:
                norms.append(tg.optim.clip_grad_norm(params, clip))
            opt.step()
        results.append(params + ([p.grad for p in params] if clip else []))
    case(name, dtype, results[0] + norms[:2], results[1] + norms[2:])


for dtype in (np.float32, np.float64):
    opt_case("SGD", lambda ps: tg.optim.SGD(ps, lr=0.1), dtype)
    opt_case("SGD momentum", lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01), dtype)
    opt_case("Adam", lambda ps: tg.optim.Adam(ps, lr=0.01, weight_decay=0.01), dtype)
    opt_case("AdamW", lambda ps: tg.optim.AdamW(ps, lr=0.01, weight_decay=0.1), dtype)
    opt_case("clip_grad_norm + SGD", lambda ps: tg.optim.SGD(ps, lr=0.1), dtype, clip=1.0)

# ---- a model moved with Module.to("cuda"), one training step -----------------------------------------------------
def model():
    return tg.nn.Sequential(tg.nn.Linear(5, 7), tg.nn.LayerNorm(7), tg.nn.Tanh(), tg.nn.Linear(7, 3))


cpu_model = model()
gpu_model = model()
gpu_model.load_state_dict(cpu_model.state_dict())
gpu_model.to("cuda")
x_host, g_host = rand((4, 5)), rand((4, 3))
results = []
for m, device in ((cpu_model, "cpu"), (gpu_model, "cuda")):
    opt = tg.optim.AdamW(m.parameters(), lr=0.01)
    out = m(tg.tensor(x_host, device=device))
    out.backward(tg.tensor(g_host, device=device))
    grads = [p.grad for p in m.parameters()]
    opt.step()
    results.append([out] + grads + list(m.parameters()))
case("model.to('cuda') step", np.float32, results[0], results[1], [p.device for p in gpu_model.parameters()])
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def simulated() -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, "37"], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def _cases(simulated: dict, *prefixes: str) -> list[dict]:
    found = [c for c in simulated["cases"] if c["name"].startswith(prefixes)]
    assert found, prefixes
    return found


def _same(case: dict) -> None:
    """Every GPU result equals the CPU's: to float32's precision (relative to the result's scale), float64's tighter."""
    tol = 2e-5 if case["dtype"] == "float32" else 1e-12
    assert len(case["cpu"]) == len(case["gpu"]), case["name"]
    for i, (want, got) in enumerate(zip(case["cpu"], case["gpu"])):
        want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
        assert want.shape == got.shape, (case["name"], i)
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(got, want, rtol=tol * 10, atol=tol * scale, err_msg=f"{case['name']} result {i}")


def test_the_kernels_ran_in_the_simulator(simulated):
    assert simulated["simulated"]


@pytest.mark.parametrize("prefix", ["matmul", "batched", "batch folded"])
def test_products_and_their_gradients_match_the_cpu(simulated, prefix):
    for c in _cases(simulated, prefix):
        assert all(d == "cuda" for d in c["devices"]), c["name"]
        _same(c)
    assert {c["dtype"] for c in _cases(simulated, prefix)} == {"float32", "float64"}


def test_transposed_operands_are_read_in_place(simulated):
    # x @ w.T and x.T @ g on the GPU: one product launch each, no copy to make the operand contiguous
    assert simulated["transposed_launches"] == {"warptiled_kernel": 2}, simulated["transposed_launches"]


def test_a_linear_layer_with_a_bias_is_one_launch(simulated):
    # x @ w.T + b on the GPU: the bias is added as the product's outputs are stored (its values: the "linear" cases)
    assert simulated["linear_launches"] == {"warptiled_kernel": 1}, simulated["linear_launches"]


def test_an_empty_inner_dimension_gives_zeros(simulated):
    for c in _cases(simulated, "matmul K=0"):
        assert np.all(np.asarray(c["gpu"][0]) == 0) and np.asarray(c["gpu"][0]).shape == (3, 4)


@pytest.mark.parametrize("prefix", ["linear", "layer_norm", "rms_norm", "attention"])
def test_fused_ops_and_their_gradients_match_the_cpu(simulated, prefix):
    for c in _cases(simulated, prefix):
        _same(c)


def test_grids_smaller_than_the_work_cover_it(simulated):
    assert len(_cases(simulated, "small grid")) == 5
    for c in _cases(simulated, "small grid"):
        _same(c)


def test_attention_probabilities_are_causal(simulated):
    for att in simulated["att"]:
        att = np.asarray(att)
        assert np.isfinite(att).all()  # every position written, the masked ones too
        T = att.shape[-1]
        assert np.all(att[..., np.triu_indices(T, 1)[0], np.triu_indices(T, 1)[1]] == 0)
        np.testing.assert_allclose(att.sum(-1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("prefix", ["SGD", "Adam", "AdamW", "clip_grad_norm"])
def test_optimizer_steps_match_the_cpu(simulated, prefix):
    for c in _cases(simulated, prefix):
        _same(c)


def test_clipping_scaled_the_gradients(simulated):
    for c in _cases(simulated, "clip_grad_norm"):
        norms = c["gpu"][-2:]
        assert all(n > 1.0 for n in norms)  # gradients ten times the usual: clipped
        grads = [np.asarray(g) for g in c["gpu"][3:6]]
        assert abs(np.sqrt(sum((g ** 2).sum() for g in grads)) - 1.0) < 1e-4


def test_a_model_moved_to_the_gpu_trains_as_on_the_cpu(simulated):
    (c,) = _cases(simulated, "model.to")
    assert c["devices"] and all(d == "cuda" for d in c["devices"])
    _same(c)
