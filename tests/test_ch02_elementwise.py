"""Elementwise ops, broadcasting, scalars on either side and type promotion, against numpy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_ch02_views import FAST, FLOATS, check, laid_out, random_array, tensors

import teenygrad as tg
from teenygrad import Tensor


def np_gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def np_sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name -> (teenygrad call, numpy oracle, input transform to stay in the domain)
UNARY = {
    "neg": (lambda t: -t, np.negative, None),
    "exp": (Tensor.exp, np.exp, None),
    "log": (Tensor.log, np.log, lambda x: np.abs(x) + 0.1),
    "sqrt": (Tensor.sqrt, np.sqrt, np.abs),
    "tanh": (Tensor.tanh, np.tanh, None),
    "sigmoid": (Tensor.sigmoid, np_sigmoid, None),
    "relu": (Tensor.relu, lambda x: np.maximum(x, 0), None),
    "gelu": (Tensor.gelu, np_gelu, None),
    "abs": (abs, np.abs, None),
}

BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "div": (lambda a, b: a / b, np.divide),
    "pow": (lambda a, b: a ** b, np.power),
    "maximum": (Tensor.maximum, np.maximum),
    "eq": (lambda a, b: a == b, np.equal),
    "ne": (lambda a, b: a != b, np.not_equal),
    "lt": (lambda a, b: a < b, np.less),
    "le": (lambda a, b: a <= b, np.less_equal),
    "gt": (lambda a, b: a > b, np.greater),
    "ge": (lambda a, b: a >= b, np.greater_equal),
}


def prepare(op: str, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep inputs where the op is defined and well-conditioned; make comparisons see some equal values."""
    if op == "pow":
        return (np.abs(x) + 0.5).astype(x.dtype), np.clip(y, -3, 3).astype(y.dtype)
    if op == "div":
        return x, (np.sign(y) * (np.abs(y) + 0.5)).astype(y.dtype)
    if op in ("eq", "ne", "le", "ge") and x.size and y.size:
        return np.round(x), np.round(y)
    return x, y


@FAST
@given(st.sampled_from(sorted(UNARY)), st.data())
def test_unary_ops_match_numpy(name, data):
    fn, oracle, domain = UNARY[name]
    arr = data.draw(tensors())[0]
    arr = domain(arr).astype(arr.dtype) if domain else arr
    expected, t = data.draw(laid_out(arr))
    check(fn(t), oracle(expected).astype(arr.dtype))


@FAST
@given(st.sampled_from(sorted(BINARY)), hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
       st.sampled_from(FLOATS), st.data())
def test_binary_ops_broadcast_like_numpy(name, shapes, dtype, data):
    fn, oracle = BINARY[name]
    (sa, sb), _ = shapes
    x, y = prepare(name, random_array(sa, dtype, 1), random_array(sb, dtype, 2))
    xe, xt = data.draw(laid_out(x))
    ye, yt = data.draw(laid_out(y))
    check(fn(xt, yt), oracle(xe, ye).astype(dtype))


@FAST
@given(st.sampled_from(["add", "sub", "mul", "div", "pow"]), tensors(max_dims=3), st.floats(0.5, 3.0))
def test_python_scalars_on_either_side_keep_the_dtype(name, pair, s):
    fn, oracle = BINARY[name]
    expected, t = pair
    if name == "pow":
        base = (np.abs(expected) + 0.5).astype(expected.dtype)
        t, expected = Tensor(base), base
    check(fn(t, s), oracle(expected, expected.dtype.type(s)))
    if name != "pow":
        safe = (np.sign(expected) * (np.abs(expected) + 0.5)).astype(expected.dtype) if name == "div" else expected
        check(fn(s, Tensor(safe)), oracle(expected.dtype.type(s), safe))


def test_operator_examples_and_int_scalars():
    t = Tensor([1.0, 2.0, 4.0])
    assert (2 - t).tolist() == [1.0, 0.0, -2.0]
    assert (t ** 2).tolist() == [1.0, 4.0, 16.0]
    assert (1 / t).tolist() == [1.0, 0.5, 0.25]
    assert (2 ** t).tolist() == [2.0, 4.0, 16.0]
    assert (t > 1.5).tolist() == [0.0, 1.0, 1.0] and (t > 1.5).dtype == tg.float32
    assert (t == Tensor([1.0, 0.0, 4.0])).tolist() == [1.0, 0.0, 1.0]
    i = Tensor([1, 2, 3])
    assert (i + 1).dtype == tg.int64 and (i * 2).tolist() == [2, 4, 6]
    assert (i + 0.5).dtype == tg.float32 and (i / 2).tolist() == [0.5, 1.0, 1.5]
    assert i.exp().dtype == tg.float32


def test_type_promotion():
    a32, a64 = tg.ones(2), tg.ones(2, dtype=tg.float64)
    assert (a32 + a64).dtype == tg.float64 and (a64 * a32).dtype == tg.float64
    assert (a32 + 1.5).dtype == tg.float32 and (a64 + 1).dtype == tg.float64
    assert (a32 + Tensor([1, 2])).dtype == tg.float32


def test_ieee_edge_values():
    t = Tensor([0.0, -1.0, 1000.0, -1000.0])
    assert t.log().tolist()[:2] == [-np.inf, pytest.approx(np.nan, nan_ok=True)]
    assert t.exp().tolist()[2] == np.inf
    assert t.sigmoid().tolist() == [0.5, pytest.approx(0.2689414), 1.0, 0.0]
    assert (Tensor([1.0, -1.0, 0.0]) / 0.0).tolist()[:2] == [np.inf, -np.inf]


def test_shape_mismatch_names_op_and_shapes():
    with pytest.raises(ValueError, match=r"add: shapes \(2, 3\) and \(4,\) do not broadcast"):
        tg.zeros(2, 3) + tg.zeros(4)
    with pytest.raises(ValueError, match=r"mul: shapes \(5,\) and \(2, 4\)"):
        tg.zeros(5) * tg.zeros(2, 4)
    with pytest.raises(TypeError):
        tg.zeros(2) + "a"
