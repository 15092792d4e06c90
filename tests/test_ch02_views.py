"""Tensor creation, conversion and views, checked against numpy (the oracle).

Also home of the hypothesis strategies the other test_ch02_* files import: random arrays (sizes 0 and 1
included, float32 and float64) and the same values held in differently laid-out tensors (contiguous,
transposed, strided, flipped with negative strides, broadcast with stride 0).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teenygrad as tg
from teenygrad import Tensor

FLOATS = [np.float32, np.float64]
FAST = settings(max_examples=40, deadline=None)


def tol(dtype) -> dict:
    return dict(rtol=2e-5, atol=2e-5) if np.dtype(dtype) == np.float32 else dict(rtol=1e-11, atol=1e-11)


def random_array(shape, dtype, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@st.composite
def arrays(draw, min_dims=0, max_dims=4, max_side=5, dtype=None, shape=None) -> np.ndarray:
    if shape is None:
        shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side))
    dtype = dtype or draw(st.sampled_from(FLOATS))
    return random_array(shape, dtype, draw(st.integers(0, 2**32 - 1)))


@st.composite
def laid_out(draw, arr: np.ndarray) -> tuple[np.ndarray, Tensor]:
    """(expected values, tensor holding them) where the tensor has a randomly chosen memory layout."""
    kind = draw(st.sampled_from(["contiguous", "transposed", "stepped", "flipped", "broadcast"]))
    if kind == "transposed":  # same values, strides reversed
        return arr, Tensor(arr.T.copy()).T
    if kind == "stepped":  # every second element of a bigger buffer, on every axis
        big = np.zeros(tuple(2 * s for s in arr.shape), dtype=arr.dtype)
        key = tuple(slice(None, None, 2) for _ in arr.shape)
        big[key] = arr
        return arr, Tensor(big)[key]
    if kind == "flipped" and arr.ndim:  # negative stride on axis 0
        return arr, Tensor(arr[::-1].copy())[::-1]
    if kind == "broadcast" and arr.ndim and arr.shape[0] > 0:  # axis 0 repeats one row: stride 0
        row = arr[:1]
        return np.broadcast_to(row, arr.shape), Tensor(row).expand(*arr.shape)
    return arr, Tensor(arr)


@st.composite
def tensors(draw, **kw) -> tuple[np.ndarray, Tensor]:
    return draw(laid_out(draw(arrays(**kw))))


def check(t: Tensor, expected: np.ndarray, **tolerance) -> None:
    got = t.numpy()
    assert got.shape == expected.shape, f"shape {got.shape} != {expected.shape}"
    assert got.dtype == expected.dtype, f"dtype {got.dtype} != {expected.dtype}"
    np.testing.assert_allclose(got, expected, **(tolerance or tol(expected.dtype)))


# ---- creation and conversion ---------------------------------------------------------------------------

def test_creation_dtypes_and_defaults():
    assert Tensor([[1.0, 2.0]]).dtype == tg.float32
    assert Tensor([1, 2]).dtype == tg.int64
    assert Tensor(np.zeros(3)).dtype == tg.float64  # numpy keeps its precision
    assert Tensor(np.zeros(3), dtype="float32").dtype == tg.float32
    assert Tensor(2.5).shape == () and Tensor(2.5).item() == 2.5
    assert tg.tensor([[1, 2], [3, 4]], dtype=tg.float64).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert tg.zeros(2, 3).shape == (2, 3) and tg.ones((4,)).numpy().sum() == 4
    assert tg.full((2,), 7).dtype == tg.int64 and tg.full((2,), 7.0).dtype == tg.float32
    assert tg.arange(5).tolist() == [0, 1, 2, 3, 4] and tg.arange(0, 1, 0.25).dtype == tg.float32


def test_unsupported_dtype_is_named():
    with pytest.raises(TypeError, match="complex128"):
        Tensor(np.zeros(2, dtype=np.complex128))
    with pytest.raises(TypeError, match="float16"):
        Tensor([1.0], dtype=np.float16)


def test_random_is_seedable():
    tg.manual_seed(3)
    a = tg.randn(4, 5)
    tg.manual_seed(3)
    assert np.array_equal(a.numpy(), tg.randn(4, 5).numpy())
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    assert np.array_equal(tg.rand(3, generator=g1).numpy(), tg.rand(3, generator=g2).numpy())
    assert tg.rand(2, 2, dtype=tg.float64).dtype == tg.float64
    u = tg.rand(1000).numpy()
    assert 0 <= u.min() and u.max() < 1


def test_repr_and_item():
    assert repr(Tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]], dtype=float32)"
    assert repr(Tensor([1, 2])) == "tensor([1, 2], dtype=int64)"
    with pytest.raises(ValueError, match="one element"):
        Tensor([1.0, 2.0]).item()


# ---- views -----------------------------------------------------------------------------------------------

def shares_memory(a: Tensor, b: Tensor) -> bool:
    return a._buf is b._buf


@FAST
@given(arrays(min_dims=1), st.data())
def test_permute_transpose_match_numpy(arr, data):
    t = Tensor(arr)
    perm = data.draw(st.permutations(range(arr.ndim)))
    check(t.permute(*perm), arr.transpose(perm))
    check(t.T, arr.T)
    if arr.ndim >= 2:
        check(t.transpose(0, -1), np.swapaxes(arr, 0, -1))
    assert shares_memory(t, t.permute(*perm))


@FAST
@given(arrays(min_dims=1, max_dims=3, max_side=6), st.data())
def test_slicing_matches_numpy(arr, data):
    t = Tensor(arr)
    key = []
    for size in arr.shape:
        kind = data.draw(st.sampled_from(["slice", "int", "none"]))
        if kind == "int" and size:
            key.append(data.draw(st.integers(-size, size - 1)))
        else:
            start = data.draw(st.none() | st.integers(-size - 1, size + 1))
            stop = data.draw(st.none() | st.integers(-size - 1, size + 1))
            step = data.draw(st.sampled_from([None, 1, 2, 3, -1, -2]))
            key.append(slice(start, stop, step))
        if data.draw(st.booleans()):
            key.insert(data.draw(st.integers(0, len(key))), None)
    view = t[tuple(key)]
    check(view, arr[tuple(key)])
    assert shares_memory(view, t)


def test_ellipsis_negative_steps_and_ints():
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = Tensor(arr)
    for key in [(..., 0), (1,), (slice(None), slice(2, 5)), (slice(None, None, -1),), (None, ..., None),
                (1, ..., slice(None, None, -2)), (-1, -1, -1)]:
        check(t[key], arr[key])
    assert t[..., ::-1].strides == (12, 4, -1)
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 3"):
        t[0, 3]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]


def test_views_write_through_the_shared_buffer():
    t = tg.zeros(3, 4)
    views = [t.T, t[1], t[:, 1:3], t[::-1, ::2], t.reshape(12), t.view(2, 6), t.unsqueeze(0), t.flatten()]
    for v in views:
        assert shares_memory(v, t)
    t._buf[5] = 42.0  # element (1, 1): every view sees the write, so none of them copied
    assert t.T[1, 1].item() == 42.0 and t[1][1].item() == 42.0 and t[:, 1:3][1, 0].item() == 42.0
    assert t[::-1, ::2].numpy()[1, 0] == 0.0 and t.reshape(12)[5].item() == 42.0
    assert t.view(2, 6)[0, 5].item() == 42.0
    t.numpy()[0, 0] = 7.0  # .numpy() is a view too
    assert t[0, 0].item() == 7.0
    t[2, 1:3] = 5.0  # and writes into views land in the original
    assert t.tolist()[2] == [0.0, 5.0, 5.0, 0.0]


@FAST
@given(arrays(min_dims=1, max_dims=4), st.data())
def test_reshape_is_a_view_when_possible(arr, data):
    expected, t = data.draw(laid_out(arr))
    sizes = [s for s in expected.shape]
    new = tuple(data.draw(st.permutations(sizes)))  # same number of elements
    if new and 0 not in new[1:] and data.draw(st.booleans()):  # -1 next to a 0 is ambiguous (numpy refuses too)
        new = (-1,) + new[1:]
    r = t.reshape(*new)
    check(r, expected.reshape(new))
    if t.is_contiguous():
        assert shares_memory(r, t)
    check(t.flatten(), expected.reshape(-1))


def test_reshape_copies_only_when_it_must_and_view_refuses():
    t = Tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4))
    assert shares_memory(t.T.reshape(4, 1, 3), t)  # splitting/adding unit dims keeps a view
    assert shares_memory(t[:, :2].reshape(3, 2, 1), t)
    c = t.T.reshape(12)  # walking the transpose in row-major order needs a copy
    assert not shares_memory(c, t) and c.tolist() == np.arange(12.0).reshape(3, 4).T.reshape(12).tolist()
    with pytest.raises(ValueError, match="view"):
        t.T.view(12)
    with pytest.raises(ValueError, match=r"\(3, 4\) into \(5,\)"):
        t.reshape(5)


@FAST
@given(arrays(max_dims=3), st.data())
def test_expand_squeeze_unsqueeze(arr, data):
    t = Tensor(arr)
    lead = data.draw(st.integers(0, 3))
    target = (lead,) + tuple(data.draw(st.integers(0, 3)) if s == 1 else s for s in arr.shape)
    e = t.expand(*target)
    check(e, np.broadcast_to(arr, target))
    assert shares_memory(e, t) and all(st_ == 0 for st_ in e.strides[:1])
    axis = data.draw(st.integers(-arr.ndim - 1, arr.ndim))
    check(t.unsqueeze(axis), np.expand_dims(arr, axis))
    check(t.squeeze(), np.squeeze(arr))


def test_contiguous_copies_non_contiguous_only():
    t = tg.randn(3, 4)
    assert t.contiguous() is t
    tt = t.T.contiguous()
    assert tt.is_contiguous() and not t.T.is_contiguous() and not shares_memory(tt, t)
    check(tt, t.numpy().T)
    assert t[:, 1].is_contiguous() is False and t[1].is_contiguous()


def test_view_errors_name_the_problem():
    t = tg.zeros(2, 3)
    with pytest.raises(ValueError, match=r"expand: cannot expand shape \(2, 3\) to \(4, 3\)"):
        t.expand(4, 3)
    with pytest.raises(IndexError, match="axis 2 is out of range for a tensor with ndim 2"):
        t.permute(0, 2)
    with pytest.raises(IndexError, match="axis -3"):
        t.transpose(-3, 0)
