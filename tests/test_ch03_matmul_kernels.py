"""The matmul kernels of Chapter 3 (teenygrad/kernels/matmul.py) against numpy as the oracle."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

mm = importlib.import_module("teenygrad.kernels.matmul")

DTYPES = [np.float32, np.float64]
# Sizes that matter to the kernels: 0, 1, primes, and either side of the tile and block sizes.
EDGES = sorted({0, 1, 2, 3, 5, 7, 13, mm.MR - 1, mm.MR, mm.MR + 1, 2 * mm.MR + 1, mm.NR - 1, mm.NR, mm.NR + 1,
                2 * mm.NR + 3})
dims = st.one_of(st.sampled_from(EDGES), st.integers(0, 80))


def check(out, a, b):
    """out must equal a @ b up to rounding: |error| <= c * eps * K * (|a| @ |b|), elementwise."""
    ref = a.astype(np.float64) @ b.astype(np.float64)
    bound = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    K = a.shape[-1]
    eps = np.finfo(a.dtype).eps
    tol = 4 * eps * max(K, 1) * bound + np.finfo(a.dtype).tiny
    err = np.abs(out.astype(np.float64) - ref)
    assert out.shape == ref.shape
    assert np.all(err <= tol), f"max error {err.max()} (allowed {tol.max()}) for {a.shape} @ {b.shape} {a.dtype}"


def run(fn, a, b):
    out = np.full((a.shape[0], b.shape[1]), np.nan, a.dtype)   # kernels must overwrite every element
    fn(a, b, out)
    return out


def operands(rng, M, K, N, dtype):
    return (rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype))


def test_registry():
    assert list(mm.KERNELS) == ["naive", "reordered", "blocked", "tiled", "parallel"]
    assert mm.DEFAULT in mm.KERNELS
    for fn in [*mm.KERNELS.values(), mm.matmul, mm.matmul_batched]:
        assert fn.__doc__ or getattr(fn, "py_func", fn).__doc__


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 0, 0), (0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (1, 5, 1), (7, 13, 3),
                                   (1, 300, 1), (300, 1, 2), (2, 1, 300), (1000, 3, 2), (2, 3, 1000),
                                   (64, 64, 64), (65, 65, 65)])
@pytest.mark.parametrize("name", list(mm.KERNELS) + ["default"])
def test_fixed_shapes(name, shape, dtype):
    fn = mm.matmul if name == "default" else mm.KERNELS[name]
    a, b = operands(np.random.default_rng(0), *shape, dtype)
    check(run(fn, a, b), a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["blocked", "tiled", "parallel", "default"])
def test_across_blocks(name, dtype):
    """Shapes that cross every cache block (KC, NC, BLOCK_*), so partial blocks and the accumulate path run;
    the parallel kernel splits the first by columns (M < N), the second by rows, both with partial tiles."""
    fn = mm.matmul if name == "default" else mm.KERNELS[name]
    M = max(mm.BLOCK_I, 4 * mm.MR) + mm.MR + 1
    K = max(mm.KC, mm.BLOCK_K) + 3
    N = max(mm.BLOCK_J, mm.NC, 2 * mm.NR) + 5
    rng = np.random.default_rng(1)
    for shape in [(M, K, N), (N, K, M)]:
        a, b = operands(rng, *shape, dtype)
        check(run(fn, a, b), a, b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=dims, K=dims, N=dims, dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1),
       a_t=st.booleans(), b_t=st.booleans(), step=st.sampled_from([1, 2]))
def test_fast_kernels_read_strided_operands(M, K, N, dtype, seed, a_t, b_t, step):
    """teenygrad hands its own kernels views (W^T in a linear layer, g^T in its backward, slices): the
    tiled, parallel and default kernels must read any non-negative strides."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((K, M * step) if a_t else (M, K * step)).astype(dtype)
    b = rng.standard_normal((N, K * step) if b_t else (K, N * step)).astype(dtype)
    a = a.T[::step] if a_t else a[:, ::step]
    b = b.T[::step] if b_t else b[:, ::step]
    assert a.shape == (M, K) and b.shape == (K, N)
    for fn in [mm.matmul_tiled, mm.matmul_parallel, mm.matmul]:
        check(run(fn, a, b), np.ascontiguousarray(a), np.ascontiguousarray(b))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=st.integers(1, 40), K=st.integers(mm.KC - 3, mm.KC + 40), N=st.integers(2 * mm.NR + 1, 3 * mm.NR + 5),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_a_transposed_a_is_copied_strip_by_strip(M, K, N, dtype, seed):
    """A transposed A (a weight's gradient, x^T g) wide enough to share is copied one strip at a time before the
    micro-kernel reads it: right across depth blocks (K around KC), with leftover rows, and next to a
    strided A that is not copied. B too, as it lies or transposed (W^T: packed 8 depths at a time, and the
    depths left over one by one, in every depth block)."""
    rng = np.random.default_rng(seed)
    for b in [rng.standard_normal((K, N)).astype(dtype), rng.standard_normal((N, K)).astype(dtype).T]:
        for a in [rng.standard_normal((K, M)).astype(dtype).T, rng.standard_normal((K, 2 * M)).astype(dtype).T[::2]]:
            for fn in [mm.matmul_tiled, mm.matmul]:
                check(run(fn, a, b), np.ascontiguousarray(a), np.ascontiguousarray(b))


def test_k_zero_gives_zeros():
    for fn in [*mm.KERNELS.values(), mm.matmul]:
        out = np.full((3, 4), 7.0, np.float32)
        fn(np.empty((3, 0), np.float32), np.empty((0, 4), np.float32), out)
        assert np.all(out == 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=dims, K=dims, N=dims, dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_kernels_random_shapes(M, K, N, dtype, seed):
    a, b = operands(np.random.default_rng(seed), M, K, N, dtype)
    for name, fn in list(mm.KERNELS.items()) + [("default", mm.matmul)]:
        if name == "naive" and M * N * K > 40**3:
            continue
        check(run(fn, a, b), a, b)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=st.integers(100, 700), K=st.integers(1, 600), N=st.integers(1, 300), dtype=st.sampled_from(DTYPES),
       seed=st.integers(0, 2**32 - 1))
def test_fast_kernels_larger_shapes(M, K, N, dtype, seed):
    a, b = operands(np.random.default_rng(seed), M, K, N, dtype)
    for fn in [mm.matmul_tiled, mm.matmul_parallel, mm.matmul]:
        check(run(fn, a, b), a, b)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(B=st.integers(0, 6), M=dims, K=dims, N=dims, dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_batched(B, M, K, N, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((B, M, K)).astype(dtype)
    b = rng.standard_normal((B, K, N)).astype(dtype)
    out = np.full((B, M, N), np.nan, dtype)
    mm.matmul_batched(a, b, out)
    for t in range(B):
        check(out[t], a[t], b[t])


@pytest.mark.parametrize("dtype", DTYPES)
def test_batched_attention_shapes(dtype):
    rng = np.random.default_rng(2)
    for shape_a, shape_b in [((48, 64, 32), (48, 32, 64)), ((48, 64, 64), (48, 64, 32)), ((1, 65, 33), (1, 33, 66))]:
        a, b = rng.standard_normal(shape_a).astype(dtype), rng.standard_normal(shape_b).astype(dtype)
        out = np.full((shape_a[0], shape_a[1], shape_b[2]), np.nan, dtype)
        mm.matmul_batched(a, b, out)
        for t in range(shape_a[0]):
            check(out[t], a[t], b[t])


def test_plain_python_mode():
    """TEENYGRAD_JIT=0 runs the same kernels as Python (for debugging); results must still be right."""
    code = (
        "import importlib, numpy as np\n"
        "mm = importlib.import_module('teenygrad.kernels.matmul')\n"
        "rng = np.random.default_rng(0)\n"
        "a, b = rng.standard_normal((7, 9)), rng.standard_normal((9, 35))\n"
        "for fn in list(mm.KERNELS.values()) + [mm.matmul]:\n"
        "    out = np.empty((7, 35)); fn(a, b, out); assert np.allclose(out, a @ b), fn\n"
        "out = np.empty((2, 7, 35)); mm.matmul_batched(np.stack([a, a]), np.stack([b, b]), out)\n"
        "assert np.allclose(out[1], a @ b)\n"
    )
    env = dict(os.environ, TEENYGRAD_JIT="0")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=root, timeout=120)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=st.lists(st.tuples(dims, st.integers(0, 80), st.integers(0, 80)), min_size=2, max_size=5),
       dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_tiled_into_reuses_its_scratch(shapes, dtype, seed):
    """One set of scratch buffers serves several products of different shapes in turn (as in attention):
    what an earlier product left in them must not leak into a later one."""
    rng = np.random.default_rng(seed)
    bp, edge = mm.tiled_buffers(np.empty(1, dtype), 80, 80)
    for M, K, N in shapes:
        a, b = operands(rng, M, K, N, dtype)
        out = np.full((M, N), np.nan, dtype)
        mm.matmul_tiled_into(a, b, out, bp, edge)
        check(out, a, b)


def test_tiled_into_refuses_small_scratch():
    bp, edge = mm.tiled_buffers(np.empty(1, np.float32), 8, 8)
    a, b = np.ones((4, 40), np.float32), np.ones((40, 40), np.float32)
    with pytest.raises(ValueError, match="scratch buffers too small"):
        mm.matmul_tiled_into(a, b, np.empty((4, 40), np.float32), bp, edge)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(T=st.integers(1, 80), N=st.integers(1, 70), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1))
def test_tiled_into_causal_modes(T, N, dtype, seed):
    """Attention's causal products: with causal=1 the wanted lower triangle of a (T, T) product is right;
    with a lower- (2) or upper-triangular (3) left operand, skipping its zeros changes nothing."""
    rng = np.random.default_rng(seed)
    bp, edge = mm.tiled_buffers(np.empty(1, dtype), 80, 80)
    a, bt = rng.standard_normal((T, N)).astype(dtype), rng.standard_normal((T, N)).astype(dtype)
    out = np.full((T, T), np.nan, dtype)
    mm.matmul_tiled_into(a, bt.T, out, bp, edge, 1)
    want = a.astype(np.float64) @ bt.T.astype(np.float64)
    low = np.tril(np.ones((T, T), bool))
    np.testing.assert_allclose(out[low], want[low], rtol=1e-4, atol=1e-4 * N)
    p, v = rng.standard_normal((T, T)).astype(dtype), rng.standard_normal((T, N)).astype(dtype)
    for mode, tri in [(2, np.tril(p)), (3, np.triu(p)), (3, np.tril(p).T)]:  # the last a transposed view, as P^T
        out = np.full((T, N), np.nan, dtype)
        mm.matmul_tiled_into(tri, v, out, bp, edge, mode)
        check(out, tri, v)


@pytest.mark.skipif(os.environ.get("TEENYGRAD_JIT", "1") == "0", reason="compiles with numba")
@settings(max_examples=5, deadline=None)  # each example compiles a fresh dispatcher twice
@given(M=st.integers(1, 9), K=st.integers(1, 9), N=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_any_layout_compiles_one_version_per_dtype(M, K, N, seed):
    """jit.any_layout: operands of every layout (contiguous, transposed, strided) run one compiled version per
    dtype (numba would compile one per combination of layouts), with the results of each."""
    import numba

    from teenygrad.kernels.jit import any_layout

    naive = numba.njit(mm.matmul_naive.py_func)  # a fresh dispatcher: nothing compiled yet
    fn = any_layout(naive)
    rng = np.random.default_rng(seed)
    for dtype in DTYPES:
        a, b = operands(rng, M, K, N, dtype)
        a_t = np.ascontiguousarray(a.T).T                       # 'F' layout
        b_s = np.repeat(b, 2, axis=1)[:, ::2]                   # 'A' layout, the same values as b
        for x, y in [(a, b), (a_t, b), (a, b_s), (a_t, b_s), (a[:, :], b[:, :])]:
            check(run(fn, x, y), a, b)
    assert len(naive.signatures) == len(DTYPES)
    assert {sig[0].layout for sig in naive.signatures} == {"A"}
