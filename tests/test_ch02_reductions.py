"""Reductions (sum, max, mean, argmax) over any axes with keepdim, and softmax / log_softmax."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_ch02_views import FAST, FLOATS, check, random_array, tensors

import teenygrad as tg
from teenygrad import Tensor


@st.composite
def axes_for(draw, ndim: int):
    """None, one axis (maybe negative), or a tuple of distinct axes."""
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none" or ndim == 0:
        return None
    if kind == "int":
        return draw(st.integers(-ndim, ndim - 1))
    return tuple(draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)))


def red_tol(expected: np.ndarray, n: int) -> dict:
    scale = max(1.0, float(np.sqrt(max(n, 1))))
    return dict(rtol=1e-5, atol=1e-5 * scale) if expected.dtype == np.float32 else dict(rtol=1e-11, atol=1e-11 * scale)


@FAST
@given(st.sampled_from(["sum", "mean", "max"]), tensors(max_side=6), st.data())
def test_reductions_match_numpy(op, pair, data):
    expected, t = pair
    axis = data.draw(axes_for(expected.ndim))
    keepdim = data.draw(st.booleans())
    n = expected.size if axis is None else int(np.prod([expected.shape[a] for a in np.atleast_1d(axis)]))
    if op in ("max", "mean") and n == 0:
        if op == "max":
            with pytest.raises(ValueError, match="empty"):
                t.max(axis, keepdim)
        return
    oracle = {"sum": np.sum, "mean": np.mean, "max": np.max}[op]
    want = np.asarray(oracle(expected, axis=axis, keepdims=keepdim)).astype(expected.dtype)
    check(getattr(t, op)(axis, keepdim), want, **red_tol(want, n))


@FAST
@given(tensors(min_dims=1, max_side=6), st.data())
def test_argmax_matches_numpy(pair, data):
    expected, t = pair
    if expected.size == 0:
        return
    axis = data.draw(st.none() | st.integers(-expected.ndim, expected.ndim - 1))
    keepdim = data.draw(st.booleans())
    want = np.argmax(expected, axis=axis, keepdims=keepdim)
    check(t.argmax(axis, keepdim), np.asarray(want, dtype=np.int64))


def test_argmax_over_several_axes_counts_in_row_major_order():
    x = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    got = Tensor(x).argmax((1, 2)).numpy()
    assert np.array_equal(got, np.argmax(x.reshape(3, 20), axis=1))


def test_reductions_of_ints_and_empty_sums():
    i = Tensor([[1, 2], [3, 4]])
    assert i.sum().item() == 10 and i.sum().dtype == tg.int64 and i.max(0).tolist() == [3, 4]
    assert i.mean().dtype == tg.float32 and i.mean().item() == 2.5
    assert tg.zeros(3, 0).sum(1).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(IndexError, match="axis 2 is out of range for a tensor with ndim 2"):
        i.sum(axis=2)


def test_column_sum_of_a_large_matrix_is_accurate():
    x = np.random.default_rng(1).random((2000, 300)).astype(np.float32)
    np.testing.assert_allclose(Tensor(x).sum(0).numpy(), x.astype(np.float64).sum(0), rtol=1e-6)
    np.testing.assert_allclose(Tensor(x).sum().item(), x.astype(np.float64).sum(), rtol=1e-6)


def np_softmax(x, axis):
    if x.size == 0:
        return x.copy()
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis):
    if x.size == 0:
        return x.copy()
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


@FAST
@given(tensors(min_dims=1, max_side=6), st.data(), st.sampled_from([1.0, 1000.0]))
def test_softmax_and_log_softmax_match_a_stable_oracle(pair, data, scale):
    expected, t = pair
    axis = data.draw(st.integers(-expected.ndim, expected.ndim - 1))
    expected = (expected.astype(np.float64) * scale).astype(expected.dtype)  # 1000s overflow a naive exp
    t = t * scale
    s = t.softmax(axis)
    check(s, np_softmax(expected, axis).astype(expected.dtype))
    check(t.log_softmax(axis), np_log_softmax(expected, axis).astype(expected.dtype),
          rtol=1e-5, atol=1e-3 if expected.dtype == np.float32 else 1e-9)
    if expected.size:
        np.testing.assert_allclose(s.sum(axis).numpy(), 1.0, rtol=1e-5)
        assert np.isfinite(t.log_softmax(axis).numpy()).all()


def test_large_softmax_uses_the_parallel_path_and_is_right():
    x = random_array((300, 500), np.float32, 3) * 50
    np.testing.assert_allclose(Tensor(x).softmax(-1).numpy(), np_softmax(x, -1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(Tensor(x).T.log_softmax(0).numpy(), np_log_softmax(x.T, 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax_of_huge_values_is_finite(dtype):
    s = Tensor(np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, -1000.0]], dtype=dtype)).softmax(1)
    np.testing.assert_allclose(s.numpy(), [[0.09003057, 0.24472847, 0.66524096], [1 / 3] * 3], rtol=1e-6)


def test_max_propagates_nan_like_numpy():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    x[1, 2] = np.nan
    t = Tensor(x)
    for axis in (None, 0, 1):
        np.testing.assert_array_equal(np.asarray(t.max(axis).numpy()), np.max(x, axis=axis))
    assert t.argmax(1).tolist() == np.argmax(x, axis=1).tolist()
