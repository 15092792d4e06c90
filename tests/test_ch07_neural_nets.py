"""Chapter 7 (neural networks and optimisers) and exercise 7: the judge's references, the solutions notebook
against the judge (and plausible mistakes against it), and the figures the chapter states."""
from __future__ import annotations

import math
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest

import teenygrad as tg
from autograder.judges.neural_nets import (
    PARTS,
    TRAINING_LOSS,
    TRAINING_SEEDS,
    TRAINING_STEPS,
    _adam_call,
    _adam_trajectory,
    _check_kaiming,
    _clip_reference,
    _lr_reference,
    _sgd_call,
    _sgd_trajectory,
)
from teenygrad import nn, optim

from conftest import notebook_namespace, replacing, run_hidden, solution_cells
from installing import pieces_from

REPO = Path(__file__).resolve().parent.parent
CHAPTER = REPO / "chapters" / "07-neural-nets.ipynb"
SOLUTIONS = REPO / "solutions" / "07-neural-nets.ipynb"
ASSIGNMENT = "07-neural-nets"
POINTS = {"modules": 3, "kaiming": 2, "xavier": 2, "linear": 3, "embedding": 2, "layer_norm": 1, "rms_norm": 1,
          "dropout": 2, "optimizer": 2, "sgd_update": 2, "adam_update": 4, "lr_at": 2, "clip_grad_norm": 3, "batches": 2}


# --- the judge's references against teenygrad's own pieces -------------------------------------------------------

def test_adam_references_match_teenygrad_optim_over_several_steps():
    rng = np.random.default_rng(1)
    for case in PARTS["adam_update"].cases(rng):
        if len(case) == 9:  # a trajectory through optim.Adam / optim.AdamW
            p0, grads, lr, b1, b2, eps, wd, decoupled, bits = case
            dtype = tg.float32 if bits == 32 else tg.float64
            param = tg.tensor(p0, dtype=dtype, requires_grad=True)
            opt = (optim.AdamW if decoupled else optim.Adam)([param], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
            got = []
            for g in grads:
                param.grad = tg.tensor(g, dtype=dtype)
                opt.step()
                got.append(param.numpy().astype(np.float64))
            tol = dict(rtol=1e-4, atol=1e-6) if bits == 32 else dict(rtol=1e-11, atol=1e-13)
            np.testing.assert_allclose(np.array(got), _adam_trajectory(*case), **tol)
            assert PARTS["adam_update"].check(case, (np.array(got),)) is None
        elif len(case) == 11:  # one call on buffers
            p, g, m, v = (np.array(a) for a in case[:4])
            optim.adam_update(p, g, m, v, *case[4:9], case[9], case[10])
            for got, want in zip((p, g, m, v), _adam_call(*case)):
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_adamw_decays_every_weight_alike_and_adam_does_not():
    """What the exercise says decoupled decay is for: with AdamW a weight with tiny gradients shrinks by
    lr * wd * p per step as much as one with huge gradients; with L2 the decay is divided by sqrt(v)."""
    p0, g = np.array([1.0, 1.0]), np.array([1e-6, 1e3])
    for decoupled in (True, False):
        p, m, v = p0.copy(), np.zeros(2), np.zeros(2)
        optim.adam_update(p, g, m, v, 0.01, 0.9, 0.999, 1e-8, 0.1, decoupled, 1)
        q, m, v = p0.copy(), np.zeros(2), np.zeros(2)
        optim.adam_update(q, g, m, v, 0.01, 0.9, 0.999, 1e-8, 0.0, decoupled, 1)
        decay = q - p  # what weight decay added to the step of each weight
        if decoupled:
            np.testing.assert_allclose(decay, [0.01 * 0.1, 0.01 * 0.1], rtol=1e-6)
        else:
            assert decay[0] > 100 * abs(decay[1])  # L2: the weight with large gradients barely decays


def test_clip_reference_matches_teenygrad():
    rng = np.random.default_rng(2)
    for case in PARTS["clip_grad_norm"].cases(rng):
        flat, sizes, has_grad, repeat, max_norm = case
        pieces = np.split(flat, np.cumsum(sizes)[:-1])
        params = [tg.tensor(np.zeros(len(g)), requires_grad=True) for g in pieces]
        for p, g, keep in zip(params, pieces, has_grad):
            p.grad = tg.tensor(g) if keep else None
        total = optim.clip_grad_norm(params + [params[repeat]], max_norm)
        after = np.concatenate([p.grad.numpy() if p.grad is not None else np.full(len(g), np.nan)
                                for p, g in zip(params, pieces)])
        want_total, want_after = _clip_reference(*case)
        assert total == pytest.approx(want_total, rel=1e-12)
        np.testing.assert_allclose(after, want_after, rtol=1e-12)
        assert PARTS["clip_grad_norm"].check(case, (np.float64(total), after)) is None


def test_kaiming_check_accepts_teenygrads_and_rejects_the_wrong_scales():
    rng = np.random.default_rng(3)
    for case in PARTS["kaiming"].cases(rng):
        shape, nonlin, kind, seed = case
        init = nn.init.kaiming_uniform_ if kind == "uniform" else nn.init.kaiming_normal_
        shape = tuple(int(s) for s in np.atleast_1d(shape))
        if len(shape) < 2:
            with pytest.raises(ValueError):
                init(nn.parameter(*shape))
            assert _check_kaiming(case, (np.int64(1),)) is None and _check_kaiming(case, (np.int64(0),)) is not None
            continue
        t = nn.parameter(*shape)
        w = init(t, nonlin).numpy().copy()
        assert _check_kaiming(case, (w, np.int64(1), np.int64(1))) is None, case
        fan_in, fan_out = shape[1] * math.prod(shape[2:]), shape[0] * math.prod(shape[2:])
        assert _check_kaiming(case, (w * math.sqrt(fan_in / fan_out), np.int64(1), np.int64(1))) is not None or \
            abs(fan_in / fan_out - 1) < 0.1  # the fan out instead of the fan in
        assert _check_kaiming(case, (w * math.sqrt(2), np.int64(1), np.int64(1))) is not None  # a variance off by 2
        assert _check_kaiming(case, (w, np.int64(0), np.int64(1))) is not None  # not in place
        assert _check_kaiming(case, (w, np.int64(1), np.int64(0))) is not None  # numpy's generator


def test_kaiming_uses_the_fan_in_of_any_layout():
    tg.manual_seed(0)
    w = nn.init.kaiming_normal_(nn.parameter(64, 30, 5, 5), "tanh").numpy()  # fan in 30 * 25
    assert w.std() == pytest.approx((5 / 3) / math.sqrt(750), rel=0.02)
    w = nn.init.kaiming_uniform_(nn.parameter(3000, 20)).numpy()
    assert np.abs(w).max() <= math.sqrt(2) * math.sqrt(3 / 20) and w.std() == pytest.approx(math.sqrt(2 / 20), rel=0.02)


def test_sgd_references_match_teenygrad_optim_over_several_steps():
    rng = np.random.default_rng(4)
    for case in PARTS["sgd_update"].cases(rng):
        if len(case) == 2:
            continue
        if np.ndim(case[1]) == 1:  # one call on buffers
            p, g, buf = (np.array(a, dtype=np.float64) for a in case[:3])
            optim.sgd_update(p, g, buf, *case[3:])
            assert PARTS["sgd_update"].check(case, (p, g, buf)) is None
            np.testing.assert_allclose(p, _sgd_call(*case)[0], rtol=1e-12)
            continue
        p0, grads, lr, momentum, wd, bits = case
        param = tg.tensor(p0, dtype=tg.float32 if bits == 32 else tg.float64, requires_grad=True)
        opt, got = optim.SGD([param], lr=lr, momentum=momentum, weight_decay=wd), []
        for g in grads:
            param.grad = tg.tensor(g, dtype=param.dtype)
            opt.step()
            got.append(param.numpy().astype(np.float64))
        assert PARTS["sgd_update"].check(case, (np.array(got),)) is None
        if bits == 64:
            np.testing.assert_allclose(got, _sgd_trajectory(*case), rtol=1e-12)


def test_lr_reference_matches_teenygrad_and_rejects_an_off_by_one_warmup():
    rng = np.random.default_rng(5)
    for case in PARTS["lr_at"].cases(rng):
        total, base, warmup, kind, min_lr = case
        if kind not in ("cosine", "linear", "constant"):
            with pytest.raises(ValueError):
                optim.lr_at(0, total, base, warmup, kind, min_lr)
            assert PARTS["lr_at"].check(case, (np.int64(1),)) is None
            continue
        got = np.array([optim.lr_at(s, total, base, warmup, kind, min_lr) for s in range(total + 3)])
        np.testing.assert_allclose(got, _lr_reference(*case), rtol=1e-12)
        assert PARTS["lr_at"].check(case, (got,)) is None
        if warmup:
            late = np.array([optim.lr_at(s, total, base, warmup, kind, min_lr) if s >= warmup else base * s / warmup
                             for s in range(total + 3)])
            assert PARTS["lr_at"].check(case, (late,)) is not None  # a warmup that starts at 0


def test_batches_and_modules_checks_accept_teenygrads_own_pieces():
    rng = np.random.default_rng(6)
    for case in PARTS["batches"].cases(rng):
        if len(case) == 3:
            n, batch, other = case
            with pytest.raises(ValueError):
                tg.datasets.batches(tg.tensor(np.zeros((n, 3))), tg.tensor(np.arange(other)), batch_size=batch)
            continue
        n, batch, shuffle, drop_last, seed, seeded = case
        if seeded:
            tg.manual_seed(seed)
        y = tg.tensor(np.arange(n))
        served = list(tg.datasets.batches(y, batch_size=batch, shuffle=bool(shuffle), drop_last=bool(drop_last),
                                          rng=None if seeded else np.random.default_rng(seed)))
        rows = np.concatenate([b[0].numpy() for b in served]) if served else np.zeros(0, np.int64)
        sizes = np.array([b[0].shape[0] for b in served])
        assert PARTS["batches"].check(case, (rows, sizes, np.int64(1))) is None, case
        assert PARTS["batches"].check(case, (rows, sizes, np.int64(0))) is not None
        if shuffle and n > 2:
            assert PARTS["batches"].check(case, (np.sort(rows), sizes, np.int64(1))) is not None or \
                np.array_equal(np.sort(rows), rows)


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    for name in ("adam_update", "sgd_update"):
        cases = PARTS[name].cases(rng)
        assert cases[-1][1] == TRAINING_STEPS and sum(len(c) == 2 for c in cases) == 1, name
    sgd = PARTS["sgd_update"].cases(rng)
    assert any(c[3] == 0 and c[4] == 0 for c in sgd if len(c) == 6 and np.ndim(c[1]) == 2)  # plain SGD
    assert any(np.size(c[2]) == 0 for c in sgd if len(c) == 6 and np.ndim(c[1]) == 1)  # no momentum: an empty buf
    lr = PARTS["lr_at"].cases(rng)
    assert {c[3] for c in lr} == {"cosine", "linear", "constant", "step"} and any(c[2] > c[0] for c in lr)
    batches = PARTS["batches"].cases(rng)
    assert any(c[1] > c[0] for c in batches if len(c) == 6) and any(c[5] for c in batches if len(c) == 6)
    assert any(len(c) == 3 and c[1] < 1 for c in batches) and any(len(c) == 3 and c[2] != c[0] for c in batches)
    adam = PARTS["adam_update"].cases(rng)
    trajectories = [c for c in adam if len(c) == 9]
    assert {c[7] for c in trajectories} == {False, True} and any(c[6] > 0 and not c[7] for c in trajectories)
    assert any(c[8] == 32 for c in trajectories) and any(c[3] == 0.0 for c in trajectories)  # float32; beta1 0
    calls = [c for c in adam if len(c) == 11]
    assert {c[10] for c in calls} >= {1, 1000} and all(np.all(c[3] >= 0) for c in calls)  # v is a mean of squares
    clip = PARTS["clip_grad_norm"].cases(rng)
    assert any(0 in c[2] for c in clip) and any(not c[0].any() for c in clip)  # no gradient; all-zero gradients
    kaiming = PARTS["kaiming"].cases(rng)
    assert any(len(c[0]) > 2 for c in kaiming) and any(len(c[0]) < 2 for c in kaiming)
    assert {c[1] for c in kaiming} >= {"relu", "tanh", "linear"} and {c[2] for c in kaiming} == {"uniform", "normal"}
    assert all(np.prod(c[0]) >= 20000 for c in kaiming if len(c[0]) >= 2)  # enough draws for a 3% std test


# --- the solutions notebook against the judge -----------------------------------------------------------

def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, _) in tests.items():
        assert points == POINTS[part]
    text = "".join(c.source for c in nbformat.read(SOLUTIONS, as_version=4).cells)
    assert f"below {TRAINING_LOSS}" in text or "losses[-1] < 0.1" in text



@pytest.mark.parametrize("seed", [0, 1])
def test_solution_code_passes_the_judge(seed, grading_dir, capsys):
    namespace, hidden = notebook_namespace(SOLUTIONS)
    with pieces_from(namespace, ASSIGNMENT):
        assert run_hidden(PARTS, namespace, hidden, PARTS, grading_dir, seed) == {part: None for part in PARTS}


def test_training_threshold_has_a_margin_on_every_problem_the_judge_draws():
    """The reference pieces end far below the stated loss on every blob problem a training case can draw, so a
    right answer never fails."""
    ns, _ = notebook_namespace(SOLUTIONS)
    for seed in TRAINING_SEEDS:
        model, params = ns["small_net"](seed)
        opt = optim.AdamW(params, lr=0.05, weight_decay=0.01)  # the package's update, as the hidden test calls it
        adamw = ns["train"](model, params, lambda i, p, g: opt._update(i, p, g), seed, TRAINING_STEPS)
        model, params = ns["small_net"](seed)
        opt = optim.SGD(params, lr=0.5, momentum=0.9)
        sgd = ns["train"](model, params, lambda i, p, g: opt._update(i, p, g), seed, TRAINING_STEPS)
        tg.manual_seed(seed)  # the linear part's training case: the same network of nn.Linear layers
        model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3))
        params = [model[0].weight, model[0].bias, model[2].weight, model[2].bias]
        opt = optim.SGD(params, lr=0.5, momentum=0.9)
        linear = ns["train"](model, params, lambda i, p, g: opt._update(i, p, g), seed, TRAINING_STEPS)
        assert max(adamw[-1], sgd[-1], linear[-1]) < TRAINING_LOSS / 5, seed


LAYER_PARTS = ["xavier", "linear", "embedding", "layer_norm", "rms_norm", "dropout"]


def test_the_books_own_layers_and_initialisers_pass_the_judge(grading_dir, capsys):
    """The hidden tests of the new parts run on teenygrad's own pieces (nothing installed): the judge accepts them,
    so its statistics and finite differences accept a right answer, not only the notebook's."""
    namespace, hidden = notebook_namespace(SOLUTIONS)
    parts = {name: PARTS[name] for name in LAYER_PARTS}
    assert run_hidden(parts, namespace, hidden, LAYER_PARTS, grading_dir, seed=3) == dict.fromkeys(LAYER_PARTS)


def test_the_layer_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    xavier = PARTS["xavier"].cases(rng)
    assert {c[0] for c in xavier} == {"fans", "gain", "xavier"} and any(c[0] == "gain" and c[1] not in
                                                                         ("linear", "sigmoid", "tanh", "relu", "gelu")
                                                                         for c in xavier)
    assert any(c[0] == "fans" and len(c[1]) < 2 for c in xavier) and any(c[0] == "fans" and len(c[1]) > 2 for c in xavier)
    draws = [c for c in xavier if c[0] == "xavier" and len(c[1]) >= 2]
    assert {c[3] for c in draws} == {"uniform", "normal"} and all(np.prod(c[1]) >= 20000 for c in draws)
    linear = PARTS["linear"].cases(rng)
    forward = [c for c in linear if c[0] == "forward"]
    assert any(np.ndim(c[1]) == 1 for c in forward) and any(np.ndim(c[1]) == 3 for c in forward)  # none, two leading
    assert any(not c[4] for c in forward) and any(c[0] == "train" for c in linear)
    inits = [c for c in linear if c[0] == "init"]
    assert {c[4] for c in inits} == {32, 64} and any(not c[3] for c in inits) and any(c[1] * c[2] >= 100000 for c in inits)
    embedding = PARTS["embedding"].cases(rng)
    ids = [c[1] for c in embedding if c[0] == "forward"]
    assert any(np.ndim(i) == 0 for i in ids) and any(len(np.unique(i)) < np.size(i) for i in ids)  # 0-d; repeats
    for name in ("layer_norm", "rms_norm"):
        cases = PARTS[name].cases(rng)
        assert any(c[0] == "error" and c[2] <= 0 for c in cases) and any(c[0] == "error" and c[1] < 1 for c in cases)
        assert any(c[0] == "forward" and np.ndim(c[1]) == 1 for c in cases)
    assert sum(isinstance(c[0], str) for c in PARTS["dropout"].cases(rng)) >= 4  # the module's cases


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "kaiming_uniform_ with the normal's bound": ("kaiming", "math.sqrt(3.0 / fan_in)", "math.sqrt(1.0 / fan_in)"),
    "kaiming without the gain": ("kaiming", "nn.init.calculate_gain(nonlinearity) / math.sqrt(fan_in)",
                                 "1 / math.sqrt(fan_in)"),
    "kaiming's fan in ignores the receptive field": ("kaiming", "fan_in = t.shape[1] * math.prod(t.shape[2:])\n    return",
                                                     "fan_in = t.shape[1]\n    return"),
    "kaiming with numpy's generator": ("kaiming", "return nn.init.uniform_(t, -a, a)",
                                       "t[...] = np.random.uniform(-a, a, t.shape)\n    return t"),
    "Adam without bias correction": ("adam_update", "m_hat = m / (1.0 - beta1 ** t)", "m_hat = m"),
    "Adam with eps under the root": ("adam_update", "(np.sqrt(v_hat) + eps)", "np.sqrt(v_hat + eps)"),
    "AdamW without its decay": ("adam_update", "p *= 1.0 - lr * weight_decay", "pass"),
    "AdamW decay divided like the gradient": (
        "adam_update", "grad = g if decoupled or weight_decay == 0 else g + weight_decay * p",
        "grad = g if weight_decay == 0 else g + weight_decay * p"),
    "Adam's L2 decay ignored": ("adam_update", "grad = g if decoupled or weight_decay == 0 else g + weight_decay * p",
                                "grad = g"),
    "Adam rebinds m instead of updating it": ("adam_update", "m *= beta1\n    m += (1.0 - beta1) * grad",
                                               "m = beta1 * m + (1.0 - beta1) * grad"),
    "clipping per parameter": ("clip_grad_norm", "coef = max_norm / (total + 1e-6)\n    if coef < 1.0:\n        for p in grads:\n            p.grad = p.grad * coef",
                               "for p in grads:\n        n = float((p.grad.numpy() ** 2).sum()) ** 0.5\n        if n > max_norm:\n            p.grad = p.grad * (max_norm / (n + 1e-6))"),
    "clipping counts a tied weight twice": ("clip_grad_norm", "if p.grad is not None and id(p) not in seen:",
                                            "if p.grad is not None:"),
    "clipping returns the norm after": ("clip_grad_norm", "    return total", "    return min(total, max_norm)"),
    "named_modules walks a shared module twice": ("modules", "        if id(module) in seen:\n            return\n",
                                                  ""),
    "named_modules breadth first": (
        "modules", "        for attr, value in module._items():\n            if isinstance(value, nn.Module):\n"
        "                visit(value, f\"{name}.{attr}\" if name else attr)",
        "        kids = [(f\"{name}.{a}\" if name else a, v) for a, v in module._items() if isinstance(v, nn.Module)]\n"
        "        found.extend(kids)\n        seen.update(id(v) for _, v in kids)\n"
        "        for kid_name, kid in kids:\n            for a, v in kid._items():\n"
        "                if isinstance(v, nn.Module):\n                    visit(v, f\"{kid_name}.{a}\")"),
    "named_parameters lists a tied weight twice": ("modules", "if is_param and id(value) not in taken:",
                                                   "if is_param:"),
    "named_parameters keeps activations": ("modules", "value.is_leaf and value.requires_grad",
                                           "value.requires_grad"),
    "load_state_dict writes before it checks": (
        "modules", "    for name, p in params.items():\n        if tuple(np.shape(state[name])) != tuple(p.shape):",
        "    for name, p in params.items():\n        p.numpy()[...] = np.asarray(state[name]).reshape(-1)[:1]\n"
        "        if tuple(np.shape(state[name])) != tuple(p.shape):"),
    "load_state_dict ignores unexpected keys": ("modules", "    if missing or unexpected:", "    if missing:"),
    "load_state_dict returns nothing": ("modules", "    return self\n", "    return None\n"),
    "SGD ignores weight decay": ("sgd_update", "direction = g + weight_decay * p if weight_decay else g.copy()",
                                  "direction = g.copy()"),
    "SGD's momentum as an average": ("sgd_update", "np.add(buf, direction, out=buf)",
                                     "np.add(buf, (1 - momentum) * direction, out=buf)"),
    "SGD rebinds buf": ("sgd_update", "np.multiply(buf, momentum, out=buf)\n        np.add(buf, direction, out=buf)\n"
                        "        direction = buf", "direction = momentum * buf + direction"),
    "warmup from 0": ("lr_at", "return base_lr * (step + 1) / warmup", "return base_lr * step / warmup"),
    "cosine past the end": ("lr_at", "progress = min(1.0, max(0.0, progress))", "progress = max(0.0, progress)"),
    "cosine ignores min_lr": ("lr_at", "return min_lr + (base_lr - min_lr) * (1.0 + math.cos(math.pi * progress)) / 2.0",
                              "return base_lr * (1.0 + math.cos(math.pi * progress)) / 2.0"),
    "unknown kinds fall back to cosine": ("lr_at", "    if kind not in (\"cosine\", \"linear\", \"constant\"):\n"
                                          "        raise ValueError(f\"lr_at: unknown kind {kind!r} (cosine, linear or constant)\")\n",
                                          ""),
    "batches reshuffles with numpy's global generator": (
        "batches", "order = (rng if rng is not None else tg.default_generator()).permutation(n)",
        "order = np.random.permutation(n)"),
    "batches drops the short batch always": ("batches", "stop = (n // batch_size) * batch_size if drop_last else n",
                                             "stop = (n // batch_size) * batch_size"),
    "dropout scales by 1 - p": ("dropout", "mask = (u >= p).to(x.dtype) / (1.0 - p)", "mask = (u >= p).to(x.dtype) * (1.0 - p)"),
    "dropout drops where u >= p": ("dropout", "mask = (u >= p)", "mask = (u < p)"),
    "dropout with numpy's generator": ("dropout", "u = tg.rand(*x.shape, dtype=x.dtype)",
                                       "u = tg.tensor(np.random.random(x.shape), dtype=x.dtype)"),
    "dropout copies when not training": ("dropout", "    if not training or p == 0:\n        return x",
                                         "    if not training or p == 0:\n        return x * 1.0"),
    "collect_params keeps a tied weight twice": ("optimizer", "        if id(t) in seen:\n            continue\n", ""),
    "collect_params accepts activations": ("optimizer", "t.is_leaf and t.requires_grad", "t.requires_grad"),
    "collect_params accepts an empty list": ("optimizer", "    if not kept:\n        raise ValueError", "    if False:\n        raise ValueError"),
    "step updates a copy": ("optimizer", "self._update(i, optim.flat_buffer(param), optim.grad_buffer(param))",
                            "self._update(i, param.numpy().reshape(-1).copy(), optim.grad_buffer(param))"),
    "step does not count": ("optimizer", "    self.steps += 1\n", ""),
    "step updates parameters without a gradient": ("optimizer", "        if param.grad is None:\n            continue\n",
                                                   "        if param.grad is None:\n            param.grad = tg.zeros(*param.shape, dtype=param.dtype)\n"),
    "fans swapped": ("xavier", "return t.shape[1] * receptive, t.shape[0] * receptive",
                     "return t.shape[0] * receptive, t.shape[1] * receptive"),
    "fans without the receptive field": ("xavier", "receptive = math.prod(t.shape[2:])", "receptive = 1"),
    "tanh's gain as relu's": ("xavier", '"tanh": 5.0 / 3.0', '"tanh": math.sqrt(2.0)'),
    "unknown gains are 1": ("xavier", "    if nonlinearity not in known:\n        raise ValueError(", "    if False:\n"
                            "        raise ValueError("),
    "xavier_uniform_ with the normal's bound": ("xavier", "a = gain * math.sqrt(6.0 / (fan_in + fan_out))",
                                                "a = gain * math.sqrt(2.0 / (fan_in + fan_out))"),
    "xavier_normal_ by the fan in only": ("xavier", "gain * math.sqrt(2.0 / (fan_in + fan_out)))",
                                          "gain * math.sqrt(1.0 / fan_in))"),
    "xavier_uniform_ with numpy's generator": ("xavier", "return nn.init.uniform_(t, -a, a)",
                                               "t[...] = np.random.uniform(-a, a, t.shape)\n    return t"),
    "Linear's weight (in, out)": ("linear", "nn.parameter(out_features, in_features, dtype=dtype)",
                                  "nn.parameter(in_features, out_features, dtype=dtype)"),
    "Linear's weight from a normal": (
        "linear", "self.weight = nn.init.uniform_(nn.parameter(out_features, in_features, dtype=dtype), -limit, limit)",
        "self.weight = nn.init.normal_(nn.parameter(out_features, in_features, dtype=dtype), 0.0, limit)"),
    "Linear's bound by the fan out": ("linear", "limit = 1.0 / math.sqrt(in_features)",
                                      "limit = 1.0 / math.sqrt(out_features)"),
    "Linear's bias starts at zero": ("linear", "self.bias = nn.init.uniform_(nn.parameter(out_features, dtype=dtype), "
                                     "-limit, limit)", "self.bias = nn.parameter(out_features, dtype=dtype)"),
    "Linear ignores dtype": ("linear", "nn.parameter(out_features, in_features, dtype=dtype)",
                             "nn.parameter(out_features, in_features)"),
    "Linear checks no sizes": ("linear", "            if isinstance(size, bool) or not isinstance(size, (int, np.integer)) "
                               "or size < 1:", "            if False:"),
    "Linear's forward in three ops": ("linear", "return tg.functional.linear(x, self.weight, self.bias)",
                                      "y = x @ self.weight.T\n        return y if self.bias is None else y + self.bias"),
    "the bias's gradient averaged": ("linear", "g_rows.sum(0)", "g_rows.mean(0)"),
    "dW transposed": ("linear", "g_rows.T @ x_rows", "x_rows.T @ g_rows"),
    "dW from the first leading index only": ("linear", "g_rows.T @ x_rows", "g_rows[:g.shape[-2]].T @ x_rows[:g.shape[-2]]"),
    "Embedding gathered in numpy": ("embedding", "picked = weight.index_select(0, flat)",
                                    "picked = tg.tensor(weight.numpy()[flat.numpy()])"),
    "Embedding drawn uniform": ("embedding", "nn.init.normal_(nn.parameter(num_embeddings, embedding_dim, dtype=dtype), "
                                "0.0, 1.0)", "nn.init.uniform_(nn.parameter(num_embeddings, embedding_dim, "
                                "dtype=dtype), -1.0, 1.0)"),
    "Embedding scaled by 1/sqrt(dim)": ("embedding", "dtype=dtype), 0.0, 1.0)", "dtype=dtype), 0.0, embedding_dim ** -0.5)"),
    "Embedding's rows flattened": ("embedding", "return picked.reshape(*index.shape, weight.shape[1])", "return picked"),
    "Embedding's table transposed": ("embedding", "nn.parameter(num_embeddings, embedding_dim, dtype=dtype)",
                                     "nn.parameter(embedding_dim, num_embeddings, dtype=dtype)"),
    "LayerNorm's weight starts at zero": ("layer_norm", "self.weight = nn.init.ones_(nn.parameter(dim, dtype=dtype))",
                                          "self.weight = nn.parameter(dim, dtype=dtype)"),
    "LayerNorm always has a bias": ("layer_norm", "self.bias = nn.parameter(dim, dtype=dtype) if bias else None",
                                    "self.bias = nn.parameter(dim, dtype=dtype)"),
    "LayerNorm forgets eps": ("layer_norm", "layer_norm(x, self.weight, self.bias, self.eps)",
                              "layer_norm(x, self.weight, self.bias)"),
    "LayerNorm accepts eps 0": ("layer_norm", "        if not eps > 0:\n            raise", "        if eps < 0:\n            raise"),
    "RMSNorm ignores its weight": ("rms_norm", "rms_norm(x, self.weight, self.eps)", "rms_norm(x, None, self.eps)"),
    "RMSNorm centres like layer norm": ("rms_norm", "tg.functional.rms_norm(x, self.weight, self.eps)",
                                        "tg.functional.layer_norm(x, self.weight, None, self.eps)"),
    "RMSNorm keeps the default eps": ("rms_norm", "self.dim, self.eps = int(dim), float(eps)",
                                      "self.dim, self.eps = int(dim), 1e-5"),
    "the Dropout module always trains": ("dropout", "return tg.functional.dropout(x, self.p, training=self.training)",
                                         "return tg.functional.dropout(x, self.p)"),
    "the Dropout module checks p only when it drops": (
        "dropout", "        if not 0 <= p < 1:\n            raise ValueError(f\"Dropout: p must be", "        if False:\n"
        "            raise ValueError(f\"Dropout: p must be"),
    "batches without the first-dim check": (
        "batches", "if any(t.ndim == 0 for t in tensors) or len({t.shape[0] for t in tensors}) != 1:", "if False:"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_answers(mistake, grading_dir, capsys):
    part, old, new = WRONG[mistake]
    namespace, hidden = notebook_namespace(SOLUTIONS, replacing(part, old, new))
    with pieces_from(namespace, ASSIGNMENT, [part]):
        verdicts = run_hidden(PARTS, namespace, hidden, [part], grading_dir, seed=5)
    assert verdicts[part] is not None, mistake


# --- the chapter ------------------------------------------------------------------------------------------

# The chapter's house rules (title, headings, outputs, exercise link): tests/test_notebooks.py

GLUED = {"ch7_one_batch_loss", "ch7_saturated_percent", "ch7_small_init_std", "ch7_init_loss_xavier", "ch7_loss_sgd",
         "ch7_loss_sgd_large_step", "ch7_loss_momentum", "ch7_loss_adam", "ch7_loss_no_zero_grad", "ch7_loss_lr_large", "ch7_test_accuracy",
         "ch7_test_errors"}


def test_every_figure_in_the_prose_is_glued_by_the_code():
    nb = nbformat.read(CHAPTER, as_version=4)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "".join(c.source for c in nb.cells if c.cell_type == "code")
    used = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)", prose))
    glued = set(re.findall(r'glue\("([a-z0-9_]+)"', code))
    assert used == glued == GLUED


@pytest.fixture(scope="module")
def chapter_figures() -> dict:
    """Run the chapter's code cells in this process (plots to a non-interactive backend) and collect its glue."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import myst_nb

    figures: dict = {}
    original = myst_nb.glue
    myst_nb.glue = lambda name, value, display=True: figures.__setitem__(name, value)
    namespace: dict = {}
    try:
        for i, cell in enumerate(nbformat.read(CHAPTER, as_version=4).cells):
            if cell.cell_type == "code":
                exec(compile(cell.source, f"<chapter 7 cell {i}>", "exec"), namespace)
                plt.close("all")
    finally:
        myst_nb.glue = original
    figures["_namespace"] = namespace
    return figures


def test_chapter_figures(chapter_figures, capsys):
    fig = chapter_figures
    assert set(fig) - {"_namespace"} == GLUED
    # "The network gets 98.1% of the test digits right (7 mistakes out of 360)"; the book promises >= 97%
    assert fig["ch7_test_accuracy"] >= 97.0
    assert fig["ch7_test_accuracy"] == pytest.approx(98.06, abs=0.6)
    assert fig["ch7_test_errors"] == round((100 - fig["ch7_test_accuracy"]) * 3.6)
    assert 5 <= fig["ch7_test_errors"] <= 8  # "about half" of chapter 6's 13 mistakes
    # "The loss falls to 3e-04": memorising one batch
    assert fig["ch7_one_batch_loss"] < 1e-3
    # initialisation: a vanished signal, a saturated one, and a healthy one that trains
    assert fig["ch7_small_init_std"] < 1e-4
    assert fig["ch7_saturated_percent"] == pytest.approx(79, abs=5)
    assert fig["ch7_init_loss_xavier"] == pytest.approx(0.22, abs=0.06)
    # "plain SGD is still at 0.38, momentum at 0.055 and Adam at 0.11"
    assert fig["ch7_loss_sgd"] == pytest.approx(0.38, abs=0.05)
    assert fig["ch7_loss_momentum"] == pytest.approx(0.055, abs=0.02)
    assert fig["ch7_loss_adam"] == pytest.approx(0.11, abs=0.03)
    assert fig["ch7_loss_momentum"] < fig["ch7_loss_adam"] < fig["ch7_loss_sgd"]
    # "plain SGD at rate 1.0 ends ... close to momentum": within twice momentum's loss, far below SGD at 0.1
    assert fig["ch7_loss_sgd_large_step"] < 2 * fig["ch7_loss_momentum"] < fig["ch7_loss_sgd"]
    # the mistakes: no zero_grad climbs back up; lr 3.0 sticks at about ln 10
    ns = fig["_namespace"]
    no_zero = ns["mistake_curves"]["no zero_grad()"]
    # (rounding changes the details of these two runs, not their shape: checked on other seeds, ends 1.5 to 6)
    assert min(no_zero) < 0.7 and fig["ch7_loss_no_zero_grad"] > max(2 * min(no_zero), 3 * fig["ch7_loss_sgd"])
    assert fig["ch7_loss_lr_large"] == pytest.approx(np.log(10), abs=0.1)
    small = ns["mistake_curves"]["lr 0.001 (too small)"]
    assert all(a > b for a, b in zip(small, small[1:])) and small[-1] > 2.2  # "flat but falling"
    # the init runs: tiny weights stay at ln 10, saturated ones learn slowly
    curves = ns["init_curves"]
    assert all(abs(v - np.log(10)) < 0.01 for v in curves["std 0.01"])
    assert curves["std 1"][-1] > 4 * fig["ch7_init_loss_xavier"]
    # dropout: forgetting eval() costs accuracy
    runs = ns["runs_in_train_mode"]
    assert max(runs) < ns["accuracy"](ns["dropout_model"], ns["Xte"], ns["yte"])
