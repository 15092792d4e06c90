"""The autograd engine: leaves and .grad, accumulation, no_grad, detach, retain_grad, deep graphs, the
error messages, in-place detection, use_rules, unbroadcast and gradcheck's report."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teenygrad as tg
from teenygrad import Tensor
from teenygrad.ops import RULES
from teenygrad.ops.movement import unbroadcast


def leaf(values, dtype=tg.float64) -> Tensor:
    return Tensor(np.asarray(values, dtype=float), dtype=dtype, requires_grad=True)


def test_leaves_get_grad_intermediates_do_not():
    x = leaf([1.0, 2.0, 3.0])
    h = x * x
    y = h.sum()
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0] and x.is_leaf and not h.is_leaf
    assert h.grad is None and y.grad is None and h.requires_grad and h.grad_fn.op == "mul"
    assert "grad_fn=<sum>" in repr(y) and "requires_grad=True" in repr(x)


def test_retain_grad_keeps_an_intermediate_gradient():
    x = leaf([1.0, 2.0])
    h = (x * 3).retain_grad()
    (h * h).sum().backward()
    assert h.grad.tolist() == [6.0, 12.0] and x.grad.tolist() == [18.0, 36.0]


def test_gradients_accumulate_across_backward_calls_and_zero_grad_resets():
    x = leaf([1.0, -1.0])
    y = (x * x).sum()
    y.backward()
    y.backward()  # the same graph, a second time: adds up
    assert x.grad.tolist() == [4.0, -4.0]
    (x * 5).sum().backward()
    assert x.grad.tolist() == [9.0, 1.0]
    x.zero_grad()
    assert x.grad is None


def test_grads_of_different_leaves_never_share_memory():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (a + b).sum().backward()  # add passes the same gradient to both inputs
    assert a.grad._buf is not b.grad._buf and a.grad.is_contiguous()
    g = Tensor(np.ones(2))
    c, d = leaf([1.0, 2.0]), leaf([1.0, 1.0])
    (c + d).backward(g)
    assert c.grad._buf is not g._buf  # a gradient you passed in is not adopted as .grad


def test_a_gradient_no_one_else_sees_is_kept_not_copied(monkeypatch):
    """Each weight's gradient is a fresh buffer that only its .grad will hold: backward keeps it (a copy would cost a
    kernel a parameter a step). The gradients the rules received are freed as the walk goes on, and a new buffer
    may get a freed one's id: that must not make it look seen (it did: 7 to 14 copies a step of this GPT)."""
    from teenygrad.gpt import GPT, GPTConfig
    copies = []
    clone = Tensor.clone
    tg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=4, n_layer=3, n_head=2, n_embd=8))
    rng = np.random.default_rng(0)
    for _ in range(4):
        _, loss = model(tg.tensor(rng.integers(0, 11, (2, 4))), tg.tensor(rng.integers(0, 11, (2, 4))))
        for p in model.parameters():
            p.grad = None
        with monkeypatch.context() as m:
            m.setattr(Tensor, "clone", lambda t, *a, **k: copies.append(t.shape) or clone(t, *a, **k))
            loss.backward()
        assert all(p.grad is not None and p.grad.is_contiguous() for p in model.parameters())
    assert copies == []


def test_explicit_grad_for_a_non_scalar_and_a_leaf_root():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    (x * 2).backward(Tensor(np.array([[1.0, 0.0], [0.0, 1.0]])))
    assert x.grad.tolist() == [[2.0, 0.0], [0.0, 2.0]]
    x.zero_grad()
    x.backward(Tensor(np.ones((2, 2))))
    assert x.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_inputs_that_do_not_require_grad_get_none():
    x, c = leaf([1.0, 2.0]), Tensor([3.0, 4.0], dtype=tg.float64)
    (x * c).sum().backward()
    assert c.grad is None and x.grad.tolist() == [3.0, 4.0]


def test_comparisons_and_argmax_are_not_differentiable():
    x = leaf([1.0, 3.0, 2.0])
    assert not (x > 2).requires_grad and not x.argmax().requires_grad and (x > 2).grad_fn is None
    ((x > 2) * x).sum().backward()  # the mask is a constant
    assert x.grad.tolist() == [0.0, 1.0, 0.0]


def test_no_grad_records_nothing_as_context_and_decorator():
    x = leaf([1.0, 2.0])
    with tg.no_grad():
        y = (x * 2).exp().reshape(2, 1).T
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled() and not y.requires_grad and y.grad_fn is None

    @tg.no_grad()
    def f(t):
        return t * 3

    @tg.no_grad
    def g(t):
        return f(t) + 1  # nested: grad mode comes back only after the outer one exits

    assert not g(x).requires_grad and tg.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with tg.no_grad():
            raise ZeroDivisionError
    assert tg.is_grad_enabled()


def test_parameter_update_under_no_grad():
    w = leaf([1.0, 2.0])
    (w * w).sum().backward()
    with tg.no_grad():
        w[...] = w - 0.5 * w.grad
    assert w.tolist() == [0.0, 0.0] and w.requires_grad and w.is_leaf


def test_detach_cuts_the_graph():
    x = leaf([1.0, 2.0])
    d = x.detach()
    assert not d.requires_grad and d._buf is x._buf
    (x * d).sum().backward()  # d is a constant: d(x*d)/dx = d
    assert x.grad.tolist() == [1.0, 2.0]


def test_a_deep_graph_needs_no_recursion():
    x = leaf([0.5])
    y = x
    for _ in range(5000):
        y = y * 1.0001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 5000])


def test_many_uses_of_one_tensor_add_up():
    x = leaf([1.0, 2.0])
    (x + x + x * 2 + x.exp()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 4 + np.exp([1.0, 2.0]))


# ---- errors ----------------------------------------------------------------------------------------------

def test_backward_errors():
    y = leaf(np.ones((3, 4))) * 2
    with pytest.raises(ValueError, match=r"grad must be given for a tensor of shape \(3, 4\); only scalars get "
                                         r"an implicit gradient of 1"):
        y.backward()
    with pytest.raises(ValueError, match="grad has shape"):
        y.backward(Tensor(np.ones(4)))
    with pytest.raises(TypeError, match="integer tensor"):
        Tensor([1, 2]).sum().backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor([1.0, 2.0]).sum().backward()
    with pytest.raises(TypeError, match="only float tensors"):
        Tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="only float tensors"):
        Tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="detach"):
        y.requires_grad = False


def test_in_place_change_of_a_saved_tensor_is_caught():
    w, x = leaf([1.0, 2.0]), Tensor([3.0, 4.0], dtype=tg.float64)
    y = (w * x).sum()  # mul saves x for dL/dw
    x[0] = 10.0
    with pytest.raises(RuntimeError, match="a tensor needed for backward was modified in place"):
        y.backward()
    z = (w * x).sum()  # recorded after the write: fine
    z.backward()
    assert w.grad.tolist() == [10.0, 4.0]
    v = x[1:]  # a write through a view bumps the shared buffer's version too
    u = (w[1:] * v).sum()
    v[0] = 1.0
    with pytest.raises(RuntimeError, match="modified in place"):
        u.backward()


def test_writing_into_a_tensor_that_requires_grad_is_refused_outside_no_grad():
    w = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match="no_grad"):
        w[0] = 3.0
    buf = Tensor(np.zeros(2))
    with pytest.raises(RuntimeError, match="no_grad"):
        buf[...] = w * 2


# ---- swapping rules ----------------------------------------------------------------------------------------

def test_use_rules_swaps_and_restores_even_on_error():
    original = RULES["add"]
    calls = []

    def my_add(ctx, g):
        calls.append(ctx.op)
        return unbroadcast(g, ctx.a.shape) * 10, unbroadcast(g, ctx.b.shape)

    x, b = leaf([[1.0, 2.0]]), leaf([1.0])
    with tg.autograd.use_rules(add=my_add):
        (x + b).sum().backward()
    assert calls == ["add"] and x.grad.tolist() == [[10.0, 10.0]] and b.grad.tolist() == [2.0]
    with pytest.raises(RuntimeError, match="boom"):
        with tg.autograd.use_rules(add=lambda ctx, g: (_ for _ in ()).throw(RuntimeError("boom"))):
            (x + b).sum().backward()
    assert RULES["add"] is original
    with pytest.raises(KeyError, match="known ops: .*matmul"):
        with tg.autograd.use_rules(plus=my_add):
            pass


def test_a_rule_with_the_wrong_shape_or_count_gets_a_clear_error():
    x, b = leaf(np.ones((2, 3))), leaf(np.ones(3))
    with tg.autograd.use_rules(add=lambda ctx, g: (g, g)):  # forgot to unbroadcast b's gradient
        with pytest.raises(ValueError, match=r"shape \(2, 3\) for input 1 of shape \(3,\).*unbroadcast"):
            (x + b).sum().backward()
    with tg.autograd.use_rules(add=lambda ctx, g: (g,)):
        with pytest.raises(ValueError, match="returned 1 gradient"):
            (x + b).sum().backward()


# ---- unbroadcast and gradcheck ---------------------------------------------------------------------------

@settings(max_examples=30, deadline=None)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4), data=st.data())
def test_unbroadcast_sums_over_broadcast_dims(shape, data):
    small = tuple(1 if data.draw(st.booleans()) else s for s in shape)[data.draw(st.integers(0, len(shape))):]
    g = np.random.default_rng(0).standard_normal(shape)
    lead = len(shape) - len(small)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(small) if s == 1 and shape[lead + i] != 1)
    expected = g.sum(axis=axes, keepdims=True).reshape(small)
    got = unbroadcast(Tensor(g), small)
    assert got.shape == small
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
    same = Tensor(g)
    assert unbroadcast(same, shape) is same  # no copy when nothing was broadcast


def test_gradcheck_reports_and_catches_a_wrong_rule():
    a, b = Tensor(np.random.default_rng(0).standard_normal((2, 3))), Tensor(np.ones(3))
    report = tg.gradcheck(lambda a, b: a * b, [a, b])
    assert report and "input 0 (2, 3)" in str(report) and "passed" in str(report)
    wrong = lambda ctx, g: (g * ctx.b, unbroadcast(g, ctx.b.shape))  # noqa: E731 - forgot the factor a
    with tg.autograd.use_rules(mul=wrong):
        report = tg.gradcheck(lambda a, b: a * b, [a, b], raise_exception=False)
        assert not report and "MISMATCH" in str(report) and report.inputs[0].ok and not report.inputs[1].ok
        with pytest.raises(AssertionError, match="FAILED"):
            tg.gradcheck(lambda a, b: a * b, [a, b])


def test_float32_forward_results_and_tensor_data_unchanged_by_autograd():
    x = Tensor(np.arange(6.0).reshape(2, 3), dtype=tg.float32, requires_grad=True)
    y = (x.softmax(-1) * 2).sum(0)
    with tg.no_grad():
        z = (x.softmax(-1) * 2).sum(0)
    np.testing.assert_array_equal(y.numpy(), z.numpy())
    y.sum().backward()
    assert x.grad.dtype == tg.float32 and x.grad.shape == (2, 3)
