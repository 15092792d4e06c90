"""teenygrad.nn: parameter discovery, modes, saving and loading, and every layer against a numpy oracle
and finite differences (float64)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import teenygrad as tg
from teenygrad import nn


def np_layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    return y * w + (0 if b is None else b)


def np_rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


class Block(nn.Module):
    def __init__(self, dim: int):
        self.attn = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return self.norm(x + self.attn(x).relu())


class Net(nn.Module):
    def __init__(self, vocab: int = 7, dim: int = 4, depth: int = 2):
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.extra = [nn.Linear(dim, dim, bias=False)]  # a plain list of modules is found too
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(dim, vocab)
        self.head.weight = self.embed.weight  # weight tying: one tensor, two places
        self.scale = tg.tensor(2.0)  # a constant, not a parameter (no requires_grad)

    def forward(self, idx):
        x = self.drop(self.embed(idx))
        for b in self.blocks:
            x = b(x)
        return self.head(self.extra[0](x) * self.scale)


# ---- discovery -------------------------------------------------------------------------------------------

def test_named_parameters_walk_attributes_lists_and_nesting_in_order():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["embed.weight", "blocks.0.attn.weight", "blocks.0.attn.bias", "blocks.0.norm.weight",
                     "blocks.0.norm.bias", "blocks.1.attn.weight", "blocks.1.attn.bias", "blocks.1.norm.weight",
                     "blocks.1.norm.bias", "extra.0.weight", "head.bias"]  # head.weight is embed.weight: once
    params = net.parameters()
    assert len({id(p) for p in params}) == len(params)
    assert net.num_parameters() == 7 * 4 + 2 * (16 + 4 + 4 + 4) + 16 + 7
    assert [type(m).__name__ for m in net.modules()] == ["Net", "Embedding", "ModuleList", "Block", "Linear",
                                                         "LayerNorm", "Block", "Linear", "LayerNorm", "Linear",
                                                         "Dropout", "Linear"]
    assert [type(m).__name__ for m in net.children()] == ["Embedding", "ModuleList", "Linear", "Dropout", "Linear"]


def test_activations_kept_on_a_module_are_not_parameters():
    lin = nn.Linear(3, 2)
    lin.out = lin(tg.randn(4, 3))  # requires grad, but not a leaf
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]


def test_a_shared_module_and_a_cycle_are_visited_once():
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    seq.me = seq  # a cycle must not recurse forever
    assert len(seq.parameters()) == 2 and len(seq.modules()) == 3


def test_sequential_is_indexable_and_iterable():
    seq = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    assert len(seq) == 3 and isinstance(seq[1], nn.Tanh) and [type(m) for m in seq][2] is nn.Linear
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    x = tg.randn(5, 3)
    np.testing.assert_allclose(seq(x).numpy(), seq[2](seq[1](seq[0](x))).numpy())
    assert "(1): Tanh()" in repr(seq)


def test_train_eval_recurse_and_dropout_obeys_them():
    net = Net()
    net.eval()
    assert all(not m.training for m in net.modules())
    idx = tg.tensor([[1, 2, 3]])
    np.testing.assert_array_equal(net(idx).numpy(), net(idx).numpy())  # no dropout in eval: deterministic
    net.train()
    assert all(m.training for m in net.modules())
    drop = nn.Dropout(0.25)
    tg.manual_seed(0)
    y = drop(tg.ones(200, 100)).numpy()
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.01 and abs(y.mean() - 1.0) < 0.03  # the expected value is kept
    np.testing.assert_array_equal(drop.eval()(tg.ones(3, 3)).numpy(), np.ones((3, 3)))
    with pytest.raises(ValueError):
        nn.Dropout(1.0)


def test_zero_grad_forgets_gradients():
    net = Net()
    net(tg.tensor([[0, 1]])).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


# ---- saving and loading ------------------------------------------------------------------------------------

def test_save_then_load_gives_identical_outputs(tmp_path):
    tg.manual_seed(1)
    net = Net().eval()
    idx = tg.tensor([[1, 2, 3, 4], [0, 6, 5, 1]])
    before = net(idx).numpy().copy()
    net.save(tmp_path / "net.npz")
    tg.manual_seed(2)
    other = Net().eval()
    assert not np.array_equal(other(idx).numpy(), before)
    other.load(tmp_path / "net.npz")
    np.testing.assert_array_equal(other(idx).numpy(), before)
    assert other.head.weight is other.embed.weight  # tying survives loading
    sd = net.state_dict()
    sd["embed.weight"][...] = 0  # a copy: changing it changes nothing in the model
    np.testing.assert_array_equal(net(idx).numpy(), before)


def test_load_state_dict_errors_name_the_problem():
    net, sd = Net(), Net().state_dict()
    with pytest.raises(KeyError, match=r"missing keys \['head.bias'\]"):
        net.load_state_dict({k: v for k, v in sd.items() if k != "head.bias"})
    with pytest.raises(KeyError, match=r"unexpected keys \['bogus'\]"):
        net.load_state_dict({**sd, "bogus": np.zeros(3)})
    before = net.state_dict()
    with pytest.raises(ValueError, match=r"blocks.1.attn.weight: saved \(4, 5\), model \(4, 4\)"):
        net.load_state_dict({**sd, "blocks.1.attn.weight": np.zeros((4, 5))})
    for k, v in net.state_dict().items():  # a refused load changes nothing
        np.testing.assert_array_equal(v, before[k])


def test_to_float64_keeps_the_same_tensors():
    net = nn.Linear(3, 2)
    w = net.weight
    ref = w.numpy().astype(np.float64)
    net.to(tg.float64)
    assert net.weight is w and w.dtype == tg.float64
    np.testing.assert_array_equal(w.numpy(), ref)


# ---- initialisers --------------------------------------------------------------------------------------------

def test_initialisers_are_reproducible_and_have_the_stated_spread():
    tg.manual_seed(3)
    a = nn.Linear(400, 300).weight.numpy().copy()
    tg.manual_seed(3)
    b = nn.Linear(400, 300).weight.numpy()
    np.testing.assert_array_equal(a, b)
    assert abs(a.max() - 1 / 20) < 1e-3 and abs(a.min() + 1 / 20) < 1e-3
    w = nn.parameter(400, 300)
    assert abs(nn.init.kaiming_normal_(w).numpy().std() - math.sqrt(2 / 300)) < 2e-3
    assert abs(nn.init.xavier_uniform_(w).numpy().max() - math.sqrt(6 / 700)) < 1e-3
    assert abs(nn.init.kaiming_uniform_(w, "tanh").numpy().std() - 5 / 3 / math.sqrt(300)) < 2e-3
    assert abs(nn.init.xavier_normal_(w).numpy().std() - math.sqrt(2 / 700)) < 2e-3
    assert abs(nn.init.normal_(w, 1.0, 0.5).numpy().mean() - 1.0) < 0.01
    assert np.all(nn.init.zeros_(w).numpy() == 0) and np.all(nn.init.ones_(w).numpy() == 1)
    assert abs(nn.Embedding(300, 400).weight.numpy().std() - 1) < 0.01


# ---- layers against numpy (random shapes) and against finite differences -----------------------------------

shapes = st.tuples(st.lists(st.integers(1, 3), max_size=2), st.integers(1, 5), st.integers(1, 5))


@settings(deadline=None, max_examples=25)
@given(shapes, st.booleans(), st.integers(0, 2**31))
def test_linear_matches_numpy(shape, bias, seed):
    lead, n_in, n_out = shape
    rng = np.random.default_rng(seed)
    lin = nn.Linear(n_in, n_out, bias=bias, dtype=tg.float64)
    assert lin.weight.shape == (n_out, n_in)
    x = rng.normal(size=(*lead, n_in))
    want = x @ lin.weight.numpy().T + (lin.bias.numpy() if bias else 0)
    np.testing.assert_allclose(lin(tg.tensor(x)).numpy(), want, rtol=1e-12, atol=1e-12)


@settings(deadline=None, max_examples=25)
@given(shapes, st.booleans(), st.integers(0, 2**31))
def test_norms_match_numpy(shape, bias, seed):
    lead, dim, _ = shape
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(*lead, dim)) * 3 + 1
    ln, rms = nn.LayerNorm(dim, bias=bias, dtype=tg.float64), nn.RMSNorm(dim, dtype=tg.float64)
    for p in ln.parameters() + rms.parameters():
        p.numpy()[...] = rng.normal(size=p.shape)
    want = np_layer_norm(x, ln.weight.numpy(), ln.bias.numpy() if bias else None, 1e-5)
    np.testing.assert_allclose(ln(tg.tensor(x)).numpy(), want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(rms(tg.tensor(x)).numpy(), np_rms_norm(x, rms.weight.numpy(), 1e-5), rtol=1e-9, atol=1e-9)


@settings(deadline=None, max_examples=25)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3), st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**31))
def test_embedding_matches_numpy(shape, num, dim, seed):
    rng = np.random.default_rng(seed)
    emb = nn.Embedding(num, dim)
    idx = rng.integers(0, num, size=shape)
    np.testing.assert_array_equal(emb(tg.tensor(idx)).numpy(), emb.weight.numpy()[idx])


def _through(module, params, args, has_input, call):
    """Call the module with its parameters replaced by gradcheck's leaves (attributes swapped back after)."""
    inp, new = (args[0], args[1:]) if has_input else (None, args)
    owners = [(mod, name, value) for _, mod in module.named_modules() for name, value in vars(mod).items()
              if isinstance(value, tg.Tensor) and any(value is p for p in params)]
    swap = {id(p): q for p, q in zip(params, new)}
    try:
        for mod, name, value in owners:
            setattr(mod, name, swap[id(value)])
        return call(inp)
    finally:
        for mod, name, value in owners:
            setattr(mod, name, value)


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.Linear(3, 4), (2, 3)),
    (lambda: nn.Linear(3, 2, bias=False), (2, 2, 3)),
    (lambda: nn.LayerNorm(5), (3, 5)),
    (lambda: nn.LayerNorm(4, bias=False), (2, 2, 4)),
    (lambda: nn.RMSNorm(5), (3, 5)),
    (lambda: nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2), nn.Tanh()), (3, 3)),
    (lambda: nn.Sequential(nn.Linear(3, 4), nn.Sigmoid(), nn.Linear(4, 2)), (3, 3)),
])
def test_layer_gradients_match_finite_differences(make, shape):
    tg.manual_seed(0)
    module = make()
    x = tg.randn(*shape, dtype=tg.float64) + 0.1  # away from relu's kink at 0
    module.to(tg.float64)
    params = module.parameters()
    for p in params:  # weights and biases away from their initial values (LayerNorm's ones and zeros)
        p.numpy()[...] += np.random.default_rng(1).normal(size=p.shape) * 0.3
    tg.gradcheck(lambda *a: _through(module, params, a, True, module), [x, *params])


def test_embedding_and_relu_gradients_match_finite_differences():
    tg.manual_seed(0)
    emb = nn.Embedding(5, 3).to(tg.float64)
    idx = tg.tensor([[0, 2, 2], [4, 0, 1]])  # repeated rows: their gradients add up
    tg.gradcheck(lambda w: _through(emb, [emb.weight], (w,), False, lambda _: emb(idx)), [emb.weight])
    relu = nn.Sequential(nn.Linear(3, 4), nn.ReLU()).to(tg.float64)
    x = tg.tensor(np.random.default_rng(2).normal(size=(4, 3)))
    params = relu.parameters()
    tg.gradcheck(lambda *a: _through(relu, params, a, True, relu), [x, *params])


def test_dropout_gradient_is_the_same_mask_scaled():
    x = tg.randn(50, 40).requires_grad_()
    tg.manual_seed(4)
    y = nn.Dropout(0.3)(x)
    y.sum().backward()
    kept = y.numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), kept / 0.7, rtol=1e-6)
