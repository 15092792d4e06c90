"""The op layer on "cuda" (chapter 11): every kernel of the GPU's table, run through teenygrad's ops in numba-cuda's
simulator, gives what the same ops give on the CPU.

numba.cuda decides once, when first imported, whether it simulates, and the test workers must not import it (as in
test_ch11_cuda.py): so `CASES`, one program that builds seeded random tensors on a device and runs the ops on them
(forward and backward), runs in ONE child process on "cuda" with the simulator on (a module-scoped fixture), and here
on "cpu"; the tests compare the two, case by case. The shapes are small (the simulator runs every thread as a Python
thread) but include size-1 dims, sizes that are not multiples of a block (32 threads in the simulator), more rows
than the simulator's grid (4 blocks: the grid-stride loops go round) and views (transposed, sliced, permuted).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

SEED = 11

CASES = r'''
def cases(tg, np, device, seed):
    """{case name: [dtype name, nested list, the result's device]} for the ops below, on `device`, from data drawn
    from `seed` (an error case: ["raised", what was raised, device])."""
    import operator
    rng = np.random.default_rng(seed)
    out = {}

    def put(name, t):
        arr = t.numpy()
        out[name] = [str(arr.dtype), arr.tolist(), t.device]

    def T(arr, requires_grad=False):
        return tg.tensor(arr, device=device, requires_grad=requires_grad)

    shapes = [(1,), (1, 7), (5, 1), (9, 37), (13, 17)]
    shapes += [tuple(int(s) for s in rng.integers(1, 8, int(rng.integers(2, 4)))) for _ in range(2)]
    for s, shape in enumerate(shapes):
        x = T(rng.standard_normal(shape).astype(np.float32))
        for op in ("neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "abs"):
            put(f"unary {op} {shape}", getattr(x, op)())
        for axis in range(len(shape)):
            put(f"sum {shape} axis {axis}", x.sum(axis))
            put(f"max {shape} axis {axis}", x.max(axis))
            put(f"argmax {shape} axis {axis}", x.argmax(axis))
            put(f"softmax {shape} axis {axis}", x.softmax(axis))
            put(f"log_softmax {shape} axis {axis}", x.log_softmax(axis))
        put(f"sum {shape} all keepdim", x.sum(keepdim=True))

    # binary ops on views: a transposed (7, 6) view, and a row sliced with a step, broadcast down it
    base = rng.standard_normal((6, 7)).astype(np.float32)
    row = rng.standard_normal(12).astype(np.float32)
    a, b = T(base).T, T(row)[::2]
    for op in ("add", "sub", "mul", "truediv", "eq", "ne", "lt", "le", "gt", "ge"):
        put(f"binary {op} view", getattr(operator, op)(a, b))
    put("binary maximum view", a.maximum(b))
    put("binary pow", T(np.abs(base) + 0.5) ** T(row[:7]))
    put("binary pow negative base", T(base) ** 0.5)  # nan where the base is negative, on both
    put("binary ties", T(np.round(base)) == T(np.round(base.T.copy()).T))
    put("binary scalar", 2.0 - a)
    put("binary 3-d broadcast", T(rng.standard_normal((3, 1, 5)).astype(np.float32)) * T(base[:4, :5]))
    put("binary div by zero", T(np.array([1.0, -1.0, 0.0], np.float32)) / T(np.array([0.0, 0.0, 0.0], np.float32)))

    # int64 and float64
    ia = T(rng.integers(-5, 5, (4, 9)))
    ib = T(rng.integers(-5, 5, (9,)))
    for name, t in [("add", ia + ib), ("mul", ia * ib), ("sub", ia - ib), ("neg", -ia), ("abs", abs(ia)),
                    ("relu", ia.relu()), ("maximum", ia.maximum(ib)), ("eq", ia == ib), ("gt", ia > ib),
                    ("sum", ia.sum(1)), ("max", ia.max(0)), ("argmax", ia.argmax(1)), ("count", (ia == ib).sum())]:
        put(f"int64 {name}", t)
    d = T(rng.standard_normal((5, 11)))  # float64
    for name, t in [("exp", d.exp()), ("gelu", d.gelu()), ("div", d / (d * d + 1.0)), ("sum", d.sum(0)),
                    ("softmax", d.softmax(1)), ("log_softmax", d.log_softmax(0)), ("pow", d.abs() ** 1.5)]:
        put(f"float64 {name}", t)

    # a column reduction (rows closer in memory than columns, more than a warp of them) and ties for argmax
    wide = T(np.round(rng.standard_normal((6, 40)) * 2).astype(np.float32))
    put("columns sum", wide.sum(0))
    put("columns max", wide.max(0))
    put("columns argmax", wide.argmax(0))
    put("rows argmax ties", wide.argmax(1))
    put("sum of nothing", T(np.zeros((3, 0), np.float32)).sum(1))

    # casts and copies
    put("to float64", a.to(tg.float64))
    put("to int64", (a * 3).to(tg.int64))
    put("int to float32", ia.to(tg.float32))
    p = T(rng.standard_normal((3, 4, 5)).astype(np.float32)).permute(2, 0, 1)
    put("contiguous permuted", p.contiguous())
    put("contiguous sliced", T(rng.standard_normal((7, 9)).astype(np.float32))[1:6:2, ::-3].contiguous())

    # backward passes: softmax, log_softmax and gelu through a weighted sum, with broadcasting
    for op in ("softmax", "log_softmax"):
        for axis in (0, 1):
            x = T(rng.standard_normal((9, 6)).astype(np.float32), requires_grad=True)
            w = T(rng.standard_normal((9, 6)).astype(np.float32))
            (getattr(x, op)(axis) * w).sum().backward()
            put(f"{op} backward axis {axis}", x.grad)
    x = T(rng.standard_normal((5, 7)).astype(np.float32), requires_grad=True)
    bias = T(rng.standard_normal(7).astype(np.float32), requires_grad=True)
    y = ((x + bias).gelu() * (x - bias).tanh()).sum()
    y.backward()
    put("gelu tanh backward x", x.grad)
    put("gelu tanh backward bias", bias.grad)
    x = T(rng.standard_normal((6, 5)).astype(np.float32), requires_grad=True)
    (x.max(1) * T(rng.standard_normal(6).astype(np.float32))).sum().backward()  # max's rule scatters on the GPU
    put("max backward", x.grad)

    # gather and index_select, forward and backward, with repeated and negative indices
    x = T(rng.standard_normal((4, 6, 3)).astype(np.float32), requires_grad=True)
    idx = T(rng.integers(-6, 6, (4, 9, 3)))
    g = x.gather(1, idx)
    put("gather", g)
    (g * T(rng.standard_normal((4, 9, 3)).astype(np.float32))).sum().backward()
    put("gather backward", x.grad)
    emb = T(rng.standard_normal((10, 5)).astype(np.float32), requires_grad=True)
    ids = T(np.array([3, 1, 3, -1, 0, 3, 9, 1], np.int64))
    e = emb.index_select(0, ids)
    put("index_select", e)
    (e * T(rng.standard_normal((8, 5)).astype(np.float32))).sum().backward()
    put("index_select backward", emb.grad)
    x = T(rng.standard_normal((3, 4, 5)).astype(np.float32), requires_grad=True)
    s = x.index_select(2, [4, 0, 4])
    put("index_select inner axis", s)
    (s * s).sum().backward()
    put("index_select inner axis backward", x.grad)

    # cross-entropy, forward and backward
    for R, C, scale in [(1, 1, 1.0), (7, 5, 1.0), (9, 40, 30.0)]:
        logits = T((rng.standard_normal((R, C)) * scale).astype(np.float32), requires_grad=True)
        targets = T(rng.integers(0, C, R))
        loss = logits.cross_entropy(targets)
        loss.backward()
        put(f"cross_entropy {R}x{C}", loss)
        put(f"cross_entropy backward {R}x{C}", logits.grad)

    # the errors the CPU raises
    two_by_three = T(np.ones((2, 3), np.float32))
    for name, fn in [("error gather out of range", lambda: two_by_three.gather(1, T(np.array([[0], [3]])))),
                     ("error index_select out of range", lambda: two_by_three.index_select(0, [0, -3])),
                     ("error bad target of cross_entropy", lambda: two_by_three.cross_entropy(T([0, 3])))]:
        try:
            fn()
            out[name] = ["raised", "nothing", device]
        except IndexError as error:
            out[name] = ["raised", "IndexError" + (" out of range" if "out of range" in str(error) else ""), device]
    # after each error, the same op with good indices (the GPU's error flag is 0 again)
    put("after errors: gather", two_by_three.gather(1, T(np.array([[2], [0]]))))
    put("after errors: index_select", two_by_three.index_select(0, [1, -2]))
    put("after errors: cross_entropy", two_by_three.cross_entropy(T([0, 2])))

    # constants made where they live (on the GPU by a launch, not copied over)
    for dtype in (tg.float32, tg.float64, tg.int64):
        put(f"made zeros {dtype}", tg.zeros(2, 3, dtype=dtype, device=device))
        put(f"made ones {dtype}", tg.ones(5, dtype=dtype, device=device))
        put(f"made full {dtype}", tg.full((4, 1), 2.75, dtype=dtype, device=device))
        put(f"made arange {dtype}", tg.arange(-7, 29, 3, dtype=dtype, device=device))
    put("made arange down", tg.arange(9, -4, -2, device=device))
    put("made arange empty", tg.arange(4, 4, device=device))
    put("made arange floats", tg.arange(0.5, 3.0, 0.25, device=device))
    put("made scalar operand", T(np.arange(6, dtype=np.float32)) * 0.5 + 2)
    return out
'''

CHILD = r'''
import json, os, sys
os.environ["TEENYGRAD_CUDA"] = "sim"
# the simulator's block manager polls its threads for syncthreads while holding the interpreter's lock: with Python's
# default 5 ms switch interval each barrier costs milliseconds, and the row kernels' trees have many (40 s -> 9 s)
sys.setswitchinterval(1e-5)
import numpy as np
import teenygrad as tg
from teenygrad.kernels.cuda import SIMULATED
exec(sys.argv[1])
report = {"simulated": SIMULATED, "cases": cases(tg, np, "cuda", int(sys.argv[2]))}
try:
    tg.tensor([1.0, 2.0]) + tg.tensor([1.0, 2.0], device="cuda")
    report["mixing"] = None
except RuntimeError as error:
    report["mixing"] = str(error)
report["devices"] = [tg.tensor([1.0], device="cuda").exp().device, tg.tensor([1], device="cuda").sum().device]
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def gpu() -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, CASES, str(SEED)], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.fixture(scope="module")
def cpu() -> dict:
    import teenygrad as tg
    namespace: dict = {}
    exec(CASES, namespace)
    with np.errstate(all="ignore"):
        return namespace["cases"](tg, np, "cpu", SEED)


def compare(gpu: dict, cpu: dict, prefix: str) -> int:
    names = [name for name in cpu if name.startswith(prefix)]
    assert names, prefix
    for name in names:
        (g_dtype, g, g_device), (c_dtype, c, c_device) = gpu["cases"][name], cpu[name]
        assert (g_dtype, g_device, c_device) == (c_dtype, "cuda", "cpu"), (name, g_dtype, c_dtype, g_device)
        if c_dtype == "int64":
            assert g == c, name
            continue
        tol = 1e-5 if c_dtype == "float32" else 1e-12
        np.testing.assert_allclose(np.array(g, np.float64), np.array(c, np.float64), rtol=tol, atol=tol, err_msg=name)
    return len(names)


def test_the_ops_ran_on_cuda_in_the_simulator(gpu, cpu):
    assert gpu["simulated"] and gpu["devices"] == ["cuda", "cuda"]
    assert set(gpu["cases"]) == set(cpu)


@pytest.mark.parametrize("prefix", ["unary ", "binary ", "int64 ", "float64 "])
def test_elementwise_ops_match_the_cpu(gpu, cpu, prefix):
    compare(gpu, cpu, prefix)


@pytest.mark.parametrize("prefix", ["sum ", "max ", "argmax ", "columns ", "rows ", "sum of nothing"])
def test_reductions_match_the_cpu(gpu, cpu, prefix):
    compare(gpu, cpu, prefix)


@pytest.mark.parametrize("prefix", ["softmax ", "log_softmax "])
def test_softmax_and_its_backward_match_the_cpu(gpu, cpu, prefix):
    assert compare(gpu, cpu, prefix) >= 10


@pytest.mark.parametrize("prefix", ["to ", "int to ", "contiguous "])
def test_casts_and_copies_match_the_cpu(gpu, cpu, prefix):
    compare(gpu, cpu, prefix)


@pytest.mark.parametrize("prefix", ["gather", "index_select", "gelu tanh backward", "max backward"])
def test_indexing_and_backward_passes_match_the_cpu(gpu, cpu, prefix):
    compare(gpu, cpu, prefix)


def test_repeated_indices_add_up(cpu):
    """The CPU's index_add on the GPU case's ids: id 3 is read three times, so its row of the gradient sums three."""
    grad = np.array(cpu["index_select backward"][1])
    assert grad[3].any() and not grad[[2, 4, 5, 6, 7, 8]].any()


def test_cross_entropy_matches_the_cpu(gpu, cpu):
    assert compare(gpu, cpu, "cross_entropy ") == 6


def test_out_of_range_indices_raise_as_on_the_cpu(gpu, cpu):
    for name in ("error gather out of range", "error index_select out of range", "error bad target of cross_entropy"):
        assert gpu["cases"][name][:2] == cpu[name][:2] == ["raised", "IndexError out of range"], name


@pytest.mark.parametrize("prefix", ["after errors: ", "made "])
def test_constants_and_ops_after_an_error_match_the_cpu(gpu, cpu, prefix):
    compare(gpu, cpu, prefix)


def test_an_op_on_two_devices_names_both(gpu):
    assert gpu["mixing"] and "cpu" in gpu["mixing"] and "cuda" in gpu["mixing"]
