"""matmul (2-D, batched with broadcasting, 1-D operands), gather, index_select, cat and stack."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_ch02_views import FAST, FLOATS, check, laid_out, random_array

import teenygrad as tg
from teenygrad import Tensor

MM_TOL = {np.dtype(np.float32): dict(rtol=1e-4, atol=1e-4), np.dtype(np.float64): dict(rtol=1e-10, atol=1e-10)}


@st.composite
def matmul_shapes(draw):
    m, k, n = (draw(st.integers(0, 6)) for _ in range(3))
    kind = draw(st.sampled_from(["2d", "batched", "vec-left", "vec-right", "vec-vec", "nd-by-2d"]))
    if kind == "vec-left":
        return (k,), draw(st.sampled_from([(k, n), (2, k, n)]))
    if kind == "vec-right":
        return draw(st.sampled_from([(m, k), (3, m, k)])), (k,)
    if kind == "vec-vec":
        return (k,), (k,)
    if kind == "nd-by-2d":
        return (2, 3, m, k), (k, n)
    if kind == "2d":
        return (m, k), (k, n)
    ba, bb = draw(st.sampled_from([((2,), (2,)), ((1,), (3,)), ((2, 1), (3,)), ((), (2,)), ((4, 1), (1, 2))]))
    return ba + (m, k), bb + (k, n)


@FAST
@given(matmul_shapes(), st.sampled_from(FLOATS), st.data())
def test_matmul_matches_numpy(shapes, dtype, data):
    sa, sb = shapes
    ae, at = data.draw(laid_out(random_array(sa, dtype, 1)))
    be, bt = data.draw(laid_out(random_array(sb, dtype, 2)))
    check(at @ bt, np.matmul(ae, be).astype(dtype), **MM_TOL[np.dtype(dtype)])


def test_matmul_promotes_and_explains_shape_errors():
    assert (tg.ones(2, 3) @ tg.ones(3, 2, dtype=tg.float64)).dtype == tg.float64
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 2\) do not align"):
        tg.ones(2, 3) @ tg.ones(4, 2)
    with pytest.raises(ValueError, match=r"batch dimensions of shapes \(2, 3, 4\) and \(3, 4, 5\)"):
        tg.ones(2, 3, 4) @ tg.ones(3, 4, 5)


@FAST
@given(st.integers(1, 3), st.integers(0, 2), st.sampled_from(FLOATS), st.data())
def test_gather_matches_take_along_axis(ndim, axis_seed, dtype, data):
    shape = tuple(data.draw(st.integers(1, 4)) for _ in range(ndim))
    axis = axis_seed % ndim
    xe, xt = data.draw(laid_out(random_array(shape, dtype, 3)))
    idx_shape = tuple(data.draw(st.integers(0, 4)) if d == axis else s for d, s in enumerate(shape))
    idx = np.random.default_rng(4).integers(-shape[axis], shape[axis], size=idx_shape)
    check(xt.gather(axis, Tensor(idx)), np.take_along_axis(xe, idx, axis=axis))


def test_index_select_is_an_embedding_lookup():
    table = random_array((10, 4), np.float32, 5)
    ids = np.array([[1, 2, 9], [0, 0, -1]])
    check(Tensor(table)[Tensor(ids)], table[ids])
    check(Tensor(table).index_select(1, [3, 0]), table[:, [3, 0]])
    check(Tensor(table).T.index_select(0, Tensor([1])), table.T[[1]])
    with pytest.raises(IndexError):
        Tensor(table)[Tensor([10])]
    with pytest.raises(TypeError, match="int64"):
        Tensor(table).gather(0, Tensor([[0.0] * 4]))


@FAST
@given(st.integers(1, 3), st.data())
def test_cat_and_stack_match_numpy(ndim, data):
    shape = tuple(data.draw(st.integers(0, 3)) for _ in range(ndim))
    axis = data.draw(st.integers(-ndim, ndim - 1))
    parts = []
    for i in range(data.draw(st.integers(1, 3))):
        s = list(shape)
        s[axis] = data.draw(st.integers(0, 3))
        parts.append(data.draw(laid_out(random_array(tuple(s), data.draw(st.sampled_from(FLOATS)), i))))
    want = np.concatenate([p[0] for p in parts], axis=axis)
    check(tg.cat([p[1] for p in parts], axis), want)
    same = [data.draw(laid_out(random_array(shape, np.float32, i))) for i in range(3)]
    check(tg.stack([p[1] for p in same], axis), np.stack([p[0] for p in same], axis=axis))


def test_cat_errors_name_shapes():
    with pytest.raises(ValueError, match=r"cat: shapes \(2, 3\) and \(2, 4\) differ outside axis 0"):
        tg.cat([tg.zeros(2, 3), tg.zeros(2, 4)])
    with pytest.raises(ValueError, match=r"stack: shapes \(2,\) and \(3,\) differ"):
        tg.stack([tg.zeros(2), tg.zeros(3)])
