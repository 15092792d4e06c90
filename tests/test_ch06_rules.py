"""Every differentiable op's backward rule against central finite differences (teenygrad.gradcheck, float64),
on random shapes from hypothesis: broadcasting, non-contiguous and negative-stride layouts, random axes."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import teenygrad as tg
from teenygrad import Tensor

CHECK = settings(max_examples=20, deadline=None)
seeds = st.integers(0, 2**32 - 1)
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


def rand(shape, seed, low=None) -> Tensor:
    x = np.random.default_rng(seed).standard_normal(shape)
    if low is not None:  # keep away from a kink or the edge of the domain: |x| >= low
        x = np.sign(x + 1e-300) * (np.abs(x) + low)
    return Tensor(x, dtype=tg.float64)


def relayout(x: Tensor, kind: str) -> Tensor:
    """The same values in another memory layout, built with differentiable ops (gradcheck copies its inputs)."""
    if kind == "transposed" and x.ndim >= 2:
        return x.T.contiguous().T
    if kind == "flipped" and x.ndim >= 1:
        return x[::-1].contiguous()[::-1]  # negative stride on axis 0
    if kind == "stepped" and x.ndim >= 1:
        return tg.stack([x, x * 0], axis=-1)[..., 0]  # every second element of a bigger buffer
    return x


layouts = st.sampled_from(["contiguous", "transposed", "flipped", "stepped"])


def check(fn, *inputs) -> None:
    report = tg.gradcheck(fn, list(inputs))
    assert report.ok, str(report)


# ---- elementwise ---------------------------------------------------------------------------------------

UNARY = {  # op -> (call, keep |x| >= low, shift to the domain)
    "neg": (lambda x: -x, None, 0), "exp": (Tensor.exp, None, 0), "log": (Tensor.log, 0.2, "abs"),
    "sqrt": (Tensor.sqrt, 0.2, "abs"), "tanh": (Tensor.tanh, None, 0), "sigmoid": (Tensor.sigmoid, None, 0),
    "relu": (Tensor.relu, 0.01, 0), "gelu": (Tensor.gelu, None, 0), "abs": (abs, 0.01, 0),
}


@pytest.mark.parametrize("op", sorted(UNARY))
@CHECK
@given(shape=shapes, seed=seeds, kind=layouts)
def test_unary(op, shape, seed, kind):
    call, low, domain = UNARY[op]
    x = rand(shape, seed, low)
    if domain == "abs":
        x = abs(x)
    check(lambda x: call(relayout(x, kind)), x)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast: some dims of one set to 1, some leading dims dropped (either side)."""
    out = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    def shrink(shape):
        shape = tuple(1 if draw(st.booleans()) else s for s in shape)
        return shape[draw(st.integers(0, len(shape))):]
    return shrink(out), shrink(out)


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b, "maximum": Tensor.maximum,
}


@pytest.mark.parametrize("op", sorted(BINARY))
@CHECK
@given(shapes2=broadcast_pair(), seed=seeds, kind=layouts)
def test_binary_broadcasting(op, shapes2, seed, kind):
    a, b = rand(shapes2[0], seed), rand(shapes2[1], seed + 1, low=0.3 if op == "div" else None)
    if op == "pow":
        a, b = abs(a) + 0.5, b.maximum(-2.0) * 1.0
    check(lambda a, b: BINARY[op](relayout(a, kind), b), a, b)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_with_python_scalars(op):
    x = abs(rand((3, 2), 0)) + 0.5
    check(lambda x: BINARY[op](x, 1.5) + BINARY[op](2.5, x) * 1.0, x)


def test_gelu_matches_its_forward_on_a_wide_range():
    check(lambda x: x.gelu(), Tensor(np.linspace(-6, 6, 41)))


# ---- views ---------------------------------------------------------------------------------------------

@CHECK
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=3), seed=seeds, kind=layouts,
       data=st.data())
def test_views(shape, seed, kind, data):
    x = rand(shape, seed)
    perm = data.draw(st.permutations(range(len(shape))))
    key = tuple(data.draw(st.sampled_from([slice(None, None, -1), slice(1, None, 2), slice(None, 1), 0, -1]))
                for _ in shape)
    check(lambda x: relayout(x, kind).permute(*perm).reshape(-1).exp(), x)
    check(lambda x: relayout(x, kind)[key].tanh(), x)
    check(lambda x: relayout(x, kind).unsqueeze(0).expand(3, *shape).transpose(0, -1), x)
    check(lambda x: (relayout(x, kind)[None, ...].flatten().view(1, -1).squeeze(0).T * 2).contiguous(), x)


def test_integer_indexing_and_clone():
    check(lambda x: x[1, ::-2].clone() * x[-1, None, ::2], rand((3, 5), 0))


def test_cast_passes_the_gradient_back_in_the_input_dtype():
    x = Tensor([1.0, 2.0], requires_grad=True)  # float32
    (x.double() * Tensor(np.array([3.0, 4.0]))).sum().backward()
    assert x.grad.dtype == tg.float32 and x.grad.tolist() == [3.0, 4.0]


# ---- matmul --------------------------------------------------------------------------------------------

MATMUL_SHAPES = [((3,), (3,)), ((3,), (3, 2)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((2, 2, 3), (3, 4)),
                 ((3,), (2, 3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((1, 2, 3), (4, 3, 2)), ((2, 3, 4), (4,)),
                 ((5, 3), (2, 1, 3, 2))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_shapes(sa, sb):
    check(lambda a, b: a @ b, rand(sa, 1), rand(sb, 2))


@CHECK
@given(seed=seeds, kind=layouts, batch=shapes, m=st.integers(1, 3), k=st.integers(1, 3), n=st.integers(1, 3))
def test_matmul_random_batches_and_layouts(seed, kind, batch, m, k, n):
    a, b = rand(batch + (m, k), seed), rand(batch[1:] + (k, n), seed + 1)
    check(lambda a, b: relayout(a, kind) @ relayout(b, kind), a, b)


# ---- reductions and softmax ----------------------------------------------------------------------------

@st.composite
def axes_of(draw, ndim):
    return draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1) if ndim else st.none(),
                          st.lists(st.integers(0, max(ndim - 1, 0)), unique=True, max_size=ndim).map(tuple)))


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
@CHECK
@given(shape=shapes, seed=seeds, kind=layouts, keepdim=st.booleans(), data=st.data())
def test_reductions(op, shape, seed, kind, keepdim, data):
    axis = data.draw(axes_of(len(shape)))
    x = rand(shape, seed)  # continuous random values: no ties in max
    check(lambda x: getattr(relayout(x, kind), op)(axis, keepdim=keepdim) * 1.0, x)


def test_max_ties_send_the_gradient_to_the_first_maximum():
    x = Tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]], requires_grad=True)
    x.max(axis=1).sum().backward()
    assert x.grad.tolist() == [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]
    y = Tensor([[5.0, 1.0], [5.0, 5.0]], requires_grad=True)
    y.max().backward()  # over all axes: first in row-major order
    assert y.grad.tolist() == [[1.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@CHECK
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4), seed=seeds, kind=layouts,
       data=st.data())
def test_softmax(op, shape, seed, kind, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1)) if shape else 0
    x = rand(shape, seed)
    check(lambda x: getattr(relayout(x, kind), op)(axis) * rand(shape, seed + 1), x)


# ---- indexing and joining ------------------------------------------------------------------------------

@CHECK
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), seed=seeds, data=st.data())
def test_gather_with_repeated_indices(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    rng = np.random.default_rng(seed)
    ishape = shape[:axis] + (data.draw(st.integers(1, 5)),) + shape[axis + 1:]
    index = Tensor(rng.integers(-shape[axis], shape[axis], ishape), dtype=tg.int64)  # repeats likely
    check(lambda x: x.gather(axis, index).exp(), rand(shape, seed))


@CHECK
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), seed=seeds, data=st.data())
def test_index_select_and_embedding(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    idx = Tensor(np.random.default_rng(seed).integers(0, shape[axis], data.draw(st.sampled_from([(5,), (2, 3)]))))
    check(lambda x: x.index_select(axis, idx).tanh(), rand(shape, seed))
    if axis == 0 and idx.ndim == 1:  # t[int64 tensor] is index_select along axis 0
        check(lambda x: x[idx].sigmoid(), rand(shape, seed))


def test_embedding_gradient_adds_up_repeated_tokens():
    table = Tensor(np.zeros((4, 2)), requires_grad=True)
    table.index_select(0, Tensor([[1, 1], [3, 1]])).sum().backward()
    assert table.grad.tolist() == [[0, 0], [3, 3], [0, 0], [1, 1]]


@CHECK
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=3), seed=seeds, data=st.data())
def test_cat_and_stack(shape, seed, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    other = shape[:axis] + (data.draw(st.integers(1, 3)),) + shape[axis + 1:]
    check(lambda a, b, c: tg.cat([a, b.exp(), a], axis) * 1.0, rand(shape, seed), rand(other, seed + 1),
          rand(shape, seed + 2))
    check(lambda a, b: tg.stack([a, b, a * b], axis).tanh(), rand(shape, seed), rand(shape, seed + 3))


# ---- cross-entropy -------------------------------------------------------------------------------------

def np_cross_entropy(x: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    """The oracle: value and gradient of mean(-log softmax(x)[t]), stable via the max."""
    x2, t2 = x.reshape(-1, x.shape[-1]), t.reshape(-1)
    z = x2 - x2.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1))
    rows = np.arange(len(t2))
    p = np.exp(z - lse[:, None])
    p[rows, t2] -= 1
    return float(np.mean(lse - z[rows, t2])), (p / len(t2)).reshape(x.shape)


@CHECK
@given(lead=hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=4), c=st.integers(1, 6), seed=seeds,
       scale=st.sampled_from([1.0, 1e4]), dtype=st.sampled_from([tg.float32, tg.float64]))
def test_cross_entropy_value_and_gradient_match_numpy(lead, c, seed, scale, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(lead + (c,)) * scale  # scale 1e4: exp would overflow without the max trick
    t = rng.integers(0, c, lead)
    logits = Tensor(x, dtype=dtype, requires_grad=True)
    loss = tg.cross_entropy(logits, Tensor(t))
    loss.backward()
    value, grad = np_cross_entropy(x.astype(dtype).astype(np.float64), t)
    tol = 1e-5 if dtype == tg.float32 else 1e-10
    assert np.isfinite(loss.item()) and abs(loss.item() - value) <= tol * max(1.0, abs(value))
    np.testing.assert_allclose(logits.grad.numpy(), grad, rtol=tol, atol=tol)


def test_cross_entropy_gradcheck_and_method():
    t = Tensor([2, 0, 2])
    check(lambda x: x.cross_entropy(t) * 3.0, rand((3, 4), 0))
    with pytest.raises(IndexError):
        tg.cross_entropy(Tensor(np.zeros((2, 3))), Tensor([0, 3]))
    with pytest.raises(ValueError, match="targets of shape"):
        tg.cross_entropy(Tensor(np.zeros((2, 3))), Tensor([0, 1, 2]))


# ---- compositions --------------------------------------------------------------------------------------

def test_reused_subexpressions_and_a_diamond():
    check(lambda x: x * x, rand((3,), 0))
    check(lambda x: (lambda h: h.exp() * h.tanh() + h)(x.sigmoid() * 2), rand((2, 3), 1))


def test_a_small_transformer_block():
    """Layer norm, attention with a causal mask, gelu MLP and a cross-entropy loss, all together."""
    T, C = 3, 4
    mask = Tensor(np.triu(np.full((T, T), -1e9), 1))
    targets = Tensor([1, 0, 3])

    def block(x, wq, wk, w1, emb):
        h = x + emb.index_select(0, Tensor([0, 2, 1]))
        mu = h.mean(-1, keepdim=True)
        h = (h - mu) / ((h - mu) ** 2).mean(-1, keepdim=True).add(1e-5).sqrt()
        att = ((h @ wq) @ (h @ wk).T * (1 / C ** 0.5) + mask).softmax(-1)
        h = h + att @ h
        h = h + (h @ w1).gelu() @ w1.T
        return h.cross_entropy(targets)

    check(block, rand((T, C), 0), rand((C, C), 1), rand((C, C), 2), rand((C, 8), 3), rand((3, C), 4))
