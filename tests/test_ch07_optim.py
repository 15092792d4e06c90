"""teenygrad.optim: each optimizer against a numpy reference over several steps (and against PyTorch when it
is installed), schedules, clipping, and the bookkeeping (skipped parameters, tied weights, in-place updates)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import teenygrad as tg
from teenygrad import nn, optim


def np_sgd(p, grads, lr, momentum, wd):
    p, v = p.copy(), np.zeros_like(p)
    for g in grads:
        d = g + wd * p
        v = momentum * v + d
        p = p - lr * (v if momentum else d)
    return p


def np_adam(p, grads, lr, b1, b2, eps, wd, decoupled):
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


def run(make_opt, p0, grads, dtype=tg.float64):
    """Step a teenygrad optimizer with the given gradients (set by hand) and return the final parameter."""
    p = tg.tensor(p0, dtype=dtype).requires_grad_()
    opt = make_opt([p])
    for g in grads:
        p.grad = tg.tensor(g, dtype=dtype)
        opt.step()
    return p.numpy()


settings_ = settings(deadline=None, max_examples=30)
shape = st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple)


@settings_
@given(shape, st.floats(0.001, 0.5), st.sampled_from([0.0, 0.5, 0.9]), st.sampled_from([0.0, 0.1]), st.integers(0, 2**31))
def test_sgd_matches_numpy(shape, lr, momentum, wd, seed):
    rng = np.random.default_rng(seed)
    p0, grads = rng.normal(size=shape), [rng.normal(size=shape) for _ in range(5)]
    got = run(lambda ps: optim.SGD(ps, lr, momentum=momentum, weight_decay=wd), p0, grads)
    np.testing.assert_allclose(got, np_sgd(p0, grads, lr, momentum, wd), rtol=1e-12, atol=1e-12)


@settings_
@given(shape, st.floats(1e-4, 0.1), st.sampled_from([(0.9, 0.999), (0.8, 0.99)]), st.sampled_from([0.0, 0.05]),
       st.booleans(), st.integers(0, 2**31))
def test_adam_and_adamw_match_numpy(shape, lr, betas, wd, decoupled, seed):
    rng = np.random.default_rng(seed)
    p0, grads = rng.normal(size=shape), [rng.normal(size=shape) * 10 ** rng.uniform(-3, 1) for _ in range(6)]
    cls = optim.AdamW if decoupled else optim.Adam
    got = run(lambda ps: cls(ps, lr=lr, betas=betas, weight_decay=wd), p0, grads)
    np.testing.assert_allclose(got, np_adam(p0, grads, lr, *betas, 1e-8, wd, decoupled), rtol=1e-10, atol=1e-12)


def test_float32_parameters_step_in_float32():
    rng = np.random.default_rng(0)
    p0, grads = rng.normal(size=(3, 4)), [rng.normal(size=(3, 4)) for _ in range(4)]
    got = run(lambda ps: optim.Adam(ps, lr=0.01), p0, grads, dtype=tg.float32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np_adam(p0, grads, 0.01, 0.9, 0.999, 1e-8, 0.0, False), rtol=1e-5, atol=1e-6)


def test_against_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    p0, grads = rng.normal(size=(5, 3)), [rng.normal(size=(5, 3)) for _ in range(8)]
    makers = [
        (lambda ps: optim.SGD(ps, 0.1, momentum=0.9, weight_decay=0.01),
         lambda ps: torch.optim.SGD(ps, 0.1, momentum=0.9, weight_decay=0.01)),
        (lambda ps: optim.Adam(ps, 0.01, weight_decay=0.1), lambda ps: torch.optim.Adam(ps, 0.01, weight_decay=0.1)),
        (lambda ps: optim.AdamW(ps, 0.01, weight_decay=0.1), lambda ps: torch.optim.AdamW(ps, 0.01, weight_decay=0.1)),
    ]
    for ours, theirs in makers:
        tp = torch.tensor(p0, requires_grad=True)
        topt = theirs([tp])
        for g in grads:
            tp.grad = torch.tensor(g)
            topt.step()
        np.testing.assert_allclose(run(ours, p0, grads), tp.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_parameters_without_gradient_are_skipped_and_keep_their_state():
    a, b = tg.ones(3).requires_grad_(), tg.ones(2).requires_grad_()
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = tg.ones(3)
    opt.step()
    np.testing.assert_array_equal(b.numpy(), np.ones(2))
    b.grad = tg.ones(2)
    opt.step()  # b's first step: bias correction for t = 1, so it moves by lr exactly, like a did
    np.testing.assert_allclose(b.numpy(), np.full(2, 0.9), rtol=1e-6)


def test_tied_parameter_is_stepped_once_and_lr_is_mutable():
    w = tg.zeros(2).requires_grad_()
    opt = optim.SGD([w, w], lr=1.0)
    w.grad = tg.ones(2)
    opt.step()
    np.testing.assert_array_equal(w.numpy(), [-1.0, -1.0])
    opt.lr = 0.5
    opt.step()
    np.testing.assert_array_equal(w.numpy(), [-1.5, -1.5])
    opt.zero_grad()
    assert w.grad is None


def test_bad_parameters_are_refused():
    with pytest.raises(TypeError):
        optim.SGD([tg.ones(2)], lr=0.1)  # no requires_grad
    with pytest.raises(ValueError):
        optim.Adam([], lr=0.1)


def test_training_loop_updates_in_place_without_tripping_autograd():
    """The same Tensor objects are updated each step; a new forward then builds a fresh graph."""
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 2))
    x, y = tg.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]), tg.tensor([0, 1, 1, 0])
    ids = [id(p) for p in model.parameters()]
    opt = optim.Adam(model.parameters(), lr=0.05)
    for _ in range(150):
        loss = tg.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert [id(p) for p in model.parameters()] == ids
    assert loss.item() < 0.05  # XOR learnt


# ---- schedules --------------------------------------------------------------------------------------------------

def test_lr_schedules():
    assert [optim.lr_at(s, 10, 1.0, warmup=4, kind="constant") for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    cos = [optim.lr_at(s, 12, 2.0, warmup=2, min_lr=0.2) for s in range(14)]
    assert cos[:3] == [1.0, 2.0, 2.0] and cos[12] == cos[13] == pytest.approx(0.2)
    assert cos[7] == pytest.approx(0.2 + 1.8 * 0.5)  # halfway through the decay: halfway between
    assert all(a >= b for a, b in zip(cos[2:], cos[3:]))
    lin = [optim.lr_at(s, 4, 1.0, kind="linear") for s in range(5)]
    assert lin == [1.0, 0.75, 0.5, 0.25, 0.0]
    assert optim.lr_at(3, 10, 1.0, kind="cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.3)))
    with pytest.raises(ValueError):
        optim.lr_at(0, 10, 1.0, kind="step")


def test_schedule_drives_the_optimizer():
    opt = optim.SGD([tg.zeros(1).requires_grad_()], lr=0.4)
    sched = optim.Schedule(opt, total_steps=4, warmup=2, kind="linear")
    seen = []
    for _ in range(5):
        seen.append(opt.lr)
        sched.step()
    assert seen == pytest.approx([0.2, 0.4, 0.4, 0.2, 0.0])


# ---- clipping -------------------------------------------------------------------------------------------------------

def test_clip_grad_norm():
    a, b, c = tg.zeros(2).requires_grad_(), tg.zeros(1).requires_grad_(), tg.zeros(3).requires_grad_()
    a.grad, b.grad = tg.tensor([3.0, 0.0]), tg.tensor([4.0])  # joint norm 5; c has no gradient
    assert optim.clip_grad_norm([a, b, c, a], 10.0) == pytest.approx(5.0)  # under the cap: unchanged
    np.testing.assert_array_equal(a.grad.numpy(), [3.0, 0.0])
    assert optim.clip_grad_norm([a, b, c], 1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(np.concatenate([a.grad.numpy(), b.grad.numpy()]), [0.6, 0.0, 0.8], rtol=1e-5)
    assert optim.clip_grad_norm([a, b], 1.0) == pytest.approx(1.0, rel=1e-5)
