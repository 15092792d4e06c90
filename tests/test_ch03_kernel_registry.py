"""The kernel registry (swapping kernels in and out), the pure-Python mode and the on-disk cache."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import teenygrad as tg
from teenygrad import Tensor, kernels

REPO = Path(__file__).resolve().parent.parent


def test_use_swaps_a_kernel_and_restores_it():
    calls = []
    default_add = kernels.KERNELS["add"]

    def my_add(shape, a, a_strides, a_offset, b, b_strides, b_offset, out):
        calls.append((tuple(shape), tuple(a_strides), tuple(b_strides)))
        default_add(shape, a, a_strides, a_offset, b, b_strides, b_offset, out)

    with kernels.use(add=my_add):
        assert (Tensor([1.0, 2.0]) + 1.0).tolist() == [2.0, 3.0]
        tg.zeros(4, 3) + tg.ones(3)
    assert calls == [((2,), (1,), (0,)), ((4, 3), (3, 1), (0, 1))]  # coalesced shapes, stride 0 = broadcast
    assert kernels.KERNELS["add"] is default_add


def test_use_restores_even_when_the_block_raises():
    default = kernels.KERNELS["matmul"]

    def broken(a, b, out):
        raise RuntimeError("my kernel is wrong")

    with pytest.raises(RuntimeError, match="my kernel is wrong"):
        with kernels.use(matmul=broken):
            tg.ones(2, 2) @ tg.ones(2, 2)
    assert kernels.KERNELS["matmul"] is default
    assert (tg.ones(2, 2) @ tg.ones(2, 2)).tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_unknown_kernel_names_list_the_known_ones():
    with pytest.raises(KeyError, match="unknown kernel name.*matmull.*known kernels:.*matmul"):
        with kernels.use(matmull=print):
            pass
    with pytest.raises(KeyError, match="known kernels"):
        kernels.get("nope")


def test_swapped_reduction_and_matmul_see_the_documented_arguments():
    seen = {}

    def my_sum(x, x_offset, M, sm, N, sn, out):
        seen["sum"] = (M, sm, N, sn)
        for m in range(M):
            out[m] = sum(x[x_offset + m * sm + n * sn] for n in range(N))

    def my_matmul(a, b, out):
        seen["matmul"] = (a.shape, b.shape, out.shape, a.flags.c_contiguous and b.flags.c_contiguous)
        out[...] = a @ b  # numpy is fine in a *test* kernel

    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    with kernels.use(sum=my_sum, matmul=my_matmul):
        assert Tensor(x).sum(0).tolist() == x.sum(0).tolist()
        assert (Tensor(x) @ Tensor(x).T).tolist() == (x @ x.T).tolist()
    assert seen == {"sum": (4, 1, 3, 4), "matmul": ((3, 4), (4, 3), (3, 3), True)}


SCRIPT = """
import json, time
t0 = time.perf_counter()
import teenygrad as tg
from teenygrad import Tensor
from teenygrad.kernels.jit import JIT_ENABLED
t_import = time.perf_counter() - t0
x = Tensor([[1.0, -2.0, 3.0], [0.5, 0.0, -1.0]])
out = {
    "jit": JIT_ENABLED, "import_s": t_import,
    "add": (x + x.T.T * 2).tolist(), "exp": x.exp().tolist(), "sum": x.sum(1).tolist(),
    "softmax": x.softmax(-1).tolist(), "matmul": (x @ x.T).tolist(), "argmax": x.argmax(0).tolist(),
    "gather": x.gather(1, Tensor([[2], [0]])).tolist(), "cat": tg.cat([x, x[:, ::-1]], 1).tolist(),
}
if JIT_ENABLED:
    from teenygrad.kernels import elementwise
    out["misses"] = sum(sum(k.stats.cache_misses.values()) for k in (elementwise.add, elementwise.exp))
print(json.dumps(out))
"""


def run_script(jit: str) -> dict:
    env = dict(os.environ, TEENYGRAD_JIT=jit)
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_pure_python_mode_gives_the_same_results():
    jit, plain = run_script("1"), run_script("0")
    assert jit["jit"] is True and plain["jit"] is False
    for key in ("add", "exp", "sum", "softmax", "matmul", "argmax", "gather", "cat"):
        np.testing.assert_allclose(np.array(plain[key]), np.array(jit[key]), rtol=1e-6, err_msg=key)


def test_second_process_loads_kernels_from_the_disk_cache():
    run_script("1")  # make sure the cache is filled (the test above usually did it already)
    again = run_script("1")
    assert again["misses"] == 0, "kernels were recompiled although they were cached on disk"
    # how long `import teenygrad` takes once cached is measured by benchmarks/startup.py (tests never time)
