"""The compiler's back end (chapter 10): passes, scheduling, generated numba kernels, against `ir.evaluate`."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from teenygrad.compiler import ir, passes, schedule
from teenygrad.compiler.backend import compile_graph, run_passes
from teenygrad.compiler.passes import Graph, eliminate_common, eliminate_dead, fold_constants, fold_views
from teenygrad.kernels.jit import force_path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOL = {"float64": dict(rtol=1e-9, atol=1e-12), "float32": dict(rtol=2e-4, atol=2e-5)}


@pytest.fixture(autouse=True, scope="module")
def _cache(tmp_path_factory):
    saved = os.environ.get("TEENYGRAD_CACHE_DIR")
    os.environ["TEENYGRAD_CACHE_DIR"] = str(tmp_path_factory.mktemp("compiled"))
    yield
    if saved is None:
        del os.environ["TEENYGRAD_CACHE_DIR"]
    else:
        os.environ["TEENYGRAD_CACHE_DIR"] = saved


def buffer(name, shape, dtype, rng):
    return ir.Buffer(name, tuple(shape), dtype, rng.standard_normal(shape).astype(dtype))


def c(value, like):
    return ir.const(value, like.dtype, like.shape)


def softmax(x, axis=-1):
    axis %= len(x.shape)
    m = ir.expand(ir.reduce("max", x, [axis]), x.shape)
    e = ir.unary("exp", ir.binary("sub", x, m))
    return ir.binary("div", e, ir.expand(ir.reduce("sum", e, [axis]), x.shape))


def gelu(x):
    inner = ir.binary("mul", c(0.7978845608028654, x),
                      ir.binary("add", x, ir.binary("mul", c(0.044715, x), ir.binary("mul", ir.binary("mul", x, x), x))))
    return ir.binary("mul", ir.binary("mul", c(0.5, x), x), ir.binary("add", c(1.0, x), ir.unary("tanh", inner)))


def layer_norm(x, w, b, eps=1e-5):
    R, C = x.shape
    mean = ir.expand(ir.binary("div", ir.reduce("sum", x, [1]), ir.const(float(C), x.dtype, (R, 1))), x.shape)
    d = ir.binary("sub", x, mean)
    var = ir.binary("div", ir.reduce("sum", ir.binary("mul", d, d), [1]), ir.const(float(C), x.dtype, (R, 1)))
    rstd = ir.expand(ir.unary("recip", ir.unary("sqrt", ir.binary("add", var, ir.const(eps, x.dtype, (R, 1))))),
                     x.shape)
    row = lambda v: ir.expand(ir.reshape(v, (1, C)), x.shape)  # noqa: E731
    return ir.binary("add", ir.binary("mul", ir.binary("mul", d, rstd), row(w)), row(b))


def check(outputs, effects=(), dtype="float64"):
    """Compile, run on copies of the buffers, compare outputs and assigned buffers with the numpy oracle."""
    want = ir.evaluate([*outputs, *effects])
    program = compile_graph(list(outputs), list(effects))
    arrays = [np.array(b.array, dtype=b.dtype) for b in program.inputs]
    got = program(arrays)
    for g, w, n in zip(got, want, outputs):
        assert g.shape == w.shape and g.dtype == w.dtype, (n, g.shape, g.dtype)
        np.testing.assert_allclose(g, w, **TOL[dtype], err_msg=f"\n{program.describe()}\n{program.source}")
    for e, w in zip(effects, want[len(outputs):]):
        target = arrays[[id(b) for b in program.inputs].index(id(e.srcs[0].arg))]
        np.testing.assert_allclose(target, w, **TOL[dtype], err_msg=f"assign\n{program.source}")
    return program


# ---- random graphs of primitive ops --------------------------------------------------------------------

@st.composite
def graphs(draw):
    """A random graph: loads, elementwise ops, broadcasts through reshape+expand, strided and reversed slices,
    permutes, reshapes, reductions over random axes, matmuls, where/compare, casts, cat, and an assign."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dtype = draw(st.sampled_from(["float64", "float32"]))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    bufs = [buffer("x", shape, dtype, rng)]
    x = ir.load(bufs[0])
    pool = [x]
    for _ in range(draw(st.integers(2, 7))):
        a = draw(st.sampled_from(pool))
        op = draw(st.sampled_from(["unary", "binary", "bcast", "reduce", "permute", "slice", "reshape",
                                   "matmul", "where", "cast", "cat"]))
        nd = len(a.shape)
        if op == "unary":
            y = ir.unary(draw(st.sampled_from(["neg", "tanh", "exp", "sqrt", "log"])), ir.unary("tanh", a))
            y = ir.unary("sqrt", ir.binary("add", ir.binary("mul", a, a), c(1.0, a))) if y.op in ("sqrt", "log") else y
        elif op in ("binary", "bcast"):
            b = draw(st.sampled_from(pool))
            if b.shape != a.shape:  # broadcast b's total (or a fresh row) to a's shape
                b = ir.reduce("sum", b, range(len(b.shape)))
                b = ir.expand(ir.reshape(b, (1,) * nd), a.shape)
            if op == "bcast" and nd:
                d = draw(st.integers(0, nd - 1))
                row = ir.load(buf := buffer(f"r{len(bufs)}", (a.shape[d],), dtype, rng))
                bufs.append(buf)
                b = ir.expand(ir.reshape(row, tuple(a.shape[d] if i == d else 1 for i in range(nd))), a.shape)
            y = ir.binary(draw(st.sampled_from(["add", "sub", "mul", "maximum"])), a, b)
        elif op == "reduce" and nd:
            axes = draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
            y = ir.reduce(draw(st.sampled_from(["sum", "max"])), a, axes)
        elif op == "permute" and nd > 1:
            y = ir.permute(a, tuple(draw(st.permutations(range(nd)))))
        elif op == "slice" and nd:
            spec = []
            for n in a.shape:
                step = draw(st.sampled_from([1, 2, -1, -2]))
                start = draw(st.integers(0, n - 1))
                stop = draw(st.integers(start + 1, n)) if step > 0 else draw(st.integers(-1, start - 1))
                spec.append((start, stop, step))
            y = ir.slice_(a, tuple(spec))
        elif op == "reshape":
            y = ir.reshape(a, (a.size,) if nd != 1 else (1, a.size))
        elif op == "matmul" and nd >= 2:
            w = buffer(f"w{len(bufs)}", (*a.shape[:-2], a.shape[-1], draw(st.integers(1, 4))), dtype, rng)
            bufs.append(w)
            y = ir.matmul(a, ir.load(w))
        elif op == "where":
            b = draw(st.sampled_from([p for p in pool if p.shape == a.shape]))
            y = ir.where(ir.binary(draw(st.sampled_from(["lt", "eq"])), a, b), a, ir.unary("neg", b))
        elif op == "cast":
            other = "float32" if dtype == "float64" else "float64"
            y = ir.unary("cast", ir.unary("cast", a, other), dtype)
        elif op == "cat" and nd:
            axis = draw(st.integers(0, nd - 1))
            y = ir.cat([a, ir.slice_(a, tuple((n - 1, -1, -1) if i == axis else (0, n, 1)
                                              for i, n in enumerate(a.shape)))], axis)
        else:
            continue
        pool.append(y)
    outputs = [pool[-1]] + ([draw(st.sampled_from(pool))] if draw(st.booleans()) else [])
    effects = []
    same = [p for p in pool[1:] if p.shape == x.shape]
    if same and draw(st.booleans()):
        effects.append(ir.assign(x, ir.binary("add", x, same[-1])))
    return outputs, effects, dtype


@settings(max_examples=14, deadline=None, suppress_health_check=list(HealthCheck))
@given(graphs())
def test_random_graphs_match_the_oracle(case):
    outputs, effects, dtype = case
    check(outputs, effects, dtype)


# ---- each pass does what it claims -------------------------------------------------------------------

def test_cse_merges_duplicates_and_dce_drops_unused():
    x = ir.load(ir.Buffer("x", (3, 4), "float64"))
    a, b = ir.unary("exp", x), ir.unary("exp", x)
    g = Graph([ir.binary("add", a, b)], extra=[ir.unary("tanh", x)])
    assert len(g.nodes()) == 5
    merged = eliminate_common(g)
    add = merged.outputs[0]
    assert add.srcs[0] is add.srcs[1] and len(merged.nodes()) == 4
    assert len(eliminate_dead(merged).nodes()) == 3 and "tanh" not in eliminate_dead(merged).format()


def test_constant_folding_computes_constants_and_drops_identities():
    x = ir.load(ir.Buffer("x", (3,), "float32"))
    two = ir.binary("mul", ir.const(4.0, "float32", (3,)), ir.const(0.5, "float32", (3,)))
    y = ir.binary("mul", ir.binary("add", x, ir.const(0.0, "float32", (3,))), ir.const(1.0, "float32", (3,)))
    folded = fold_constants(Graph([two, y]))
    assert folded.outputs[0].op == "const" and folded.outputs[0].arg == 2.0 and folded.outputs[0].dtype == "float32"
    assert folded.outputs[1] is x


def test_view_folding_makes_one_strided_view_and_copies_when_it_must():
    x = ir.load(buffer("x", (4, 6), "float64", np.random.default_rng(5)))
    y = ir.permute(ir.slice_(ir.reshape(x, (2, 2, 6)), ((0, 2, 1), (1, -1, -1), (0, 6, 2))), (2, 0, 1))
    out = ir.unary("exp", y)
    g = fold_views(Graph([out]))
    view = g.outputs[0].srcs[0]
    assert view.op == "view" and view.srcs[0] is x
    assert view.arg.shape == (3, 2, 2) and view.arg.strides == (2, 12, -6) and view.arg.offset == 6
    flat = ir.unary("exp", ir.reshape(ir.permute(x, (1, 0)), (24,)))  # a transpose flattened: no strides say it
    assert "contiguous" in fold_views(Graph([flat])).format()
    check([out, flat])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_sum_of_padded_pieces_is_one_cat_when_they_do_not_overlap(data):
    """The gradient of slices of one tensor (qkv's q, k and v): zero-padded pieces added up. Pieces that don't
    overlap become one cat (one kernel, no add); overlapping ones stay a sum. Either way the values are the oracle's."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    rows, axis = data.draw(st.integers(1, 4)), data.draw(st.integers(0, 1))
    n = data.draw(st.integers(2, 12))
    spans = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(1, n)), min_size=2, max_size=4))
    spans = [(a, min(n, a + w)) for a, w in spans]

    def along(k):  # a shape with k along the cat's axis
        return (k, rows) if axis == 0 else (rows, k)
    total = None
    for i, (a, b) in enumerate(spans):
        piece = ir.unary("tanh", ir.load(buffer(f"g{i}", along(b - a), "float64", rng)))
        parts = [p for p in (ir.const(0.0, "float64", along(a)) if a else None, piece,
                             ir.const(0.0, "float64", along(n - b)) if b < n else None) if p is not None]
        padded = ir.cat(parts, axis)
        total = padded if total is None else ir.binary("add", total, padded)
    program = check([total])
    ordered = sorted(spans)
    disjoint = all(b0 <= a1 for (_, b0), (a1, _) in zip(ordered, ordered[1:]))
    kinds = [k.kind for k in program.schedule.kernels]
    assert (kinds == ["cat"]) == disjoint, program.describe()


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_batched_product_read_only_transposed_is_computed_transposed(data):
    """(A B)^T = B^T A^T: a batched product whose every reader swaps its last two axes becomes the product of the
    swapped operands (attention's dk = dS^T q instead of dk^T = q^T dS), read without the swap. One read as it is,
    or a plain 2-d product, stays. The values are the oracle's either way."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    batch = tuple(data.draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    m, k, n = (data.draw(st.integers(1, 6)) for _ in range(3))
    a, b = (ir.load(buffer(name, batch + shape, "float64", rng)) for name, shape in (("a", (m, k)), ("b", (k, n))))
    rank, mm = len(batch) + 2, ir.matmul(a, b)
    swap = (*range(rank - 2), rank - 1, rank - 2)
    reads = [ir.permute(mm, swap)]
    if data.draw(st.booleans()):  # a second reader: the heads moved too, or the product as it is
        reads.append(ir.permute(mm, (1, 0, 3, 2)) if rank == 4 and data.draw(st.booleans()) else ir.unary("tanh", mm))
    outs = [ir.unary("exp", r) for r in reads]
    flipped = all(r.op == "permute" for r in reads) and rank > 2
    products = [n_ for n_ in passes.transpose_products(Graph(outs)).nodes() if n_.op == "matmul"]
    assert [p.shape[-2:] for p in products] == [(n, m) if flipped else (m, n)]
    check(outs)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_products_skip_the_zeros_of_a_causal_mask_exactly_when_it_proves_them(data):
    """Attention forward and backward by hand in primitives, with the mask lt(i + a, j + b) (true where j > i + a - b),
    or the other way round. S = q k^T and dP = g v^T may skip their elements above the diagonal (mode 1), P v and
    dS k the zeros of P and dS (2), P^T g those of P^T (3), only when every j > i is masked (a <= b); whatever the
    analysis decides, the values must be the oracle's (a wrong "zero" drops real terms)."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dtype = data.draw(st.sampled_from(["float32", "float64"]))
    B, hs = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 9))
    T = data.draw(st.integers(3, 75))  # past 32, the tiled kernel's tile width: whole tiles are skipped
    a, shift, flip = data.draw(st.integers(0, 3)), data.draw(st.integers(0, 2)), data.draw(st.booleans())
    q, k, v, g, gy = (ir.load(buffer(name, (B, T, hs), dtype, rng)) for name in ("q", "k", "v", "g", "gy"))
    shape = (B, T, T)

    def index(axis, c):
        return ir.binary("add", ir.arange(shape, axis), ir.const(c, "int64", shape))
    row, col = index(1, a), index(2, a - shift)
    mask = ir.binary("lt", col, row) if flip else ir.binary("lt", row, col)
    s = ir.binary("mul", ir.matmul(q, ir.permute(k, (0, 2, 1))), ir.const(hs ** -0.5, dtype, shape))
    p = softmax(ir.binary("add", s, ir.where(mask, ir.const(float("-inf"), dtype, shape), ir.const(0.0, dtype, shape))))
    dp = ir.matmul(gy, ir.permute(v, (0, 2, 1)))
    ds = ir.binary("mul", p, ir.binary("sub", dp, ir.expand(ir.reduce("sum", ir.binary("mul", dp, p), [2]), shape)))
    program = check([ir.matmul(p, v), ir.matmul(ir.permute(p, (0, 2, 1)), g), ir.matmul(ds, k)], dtype=dtype)
    modes = [program.schedule.causal.get(id(k.items[0].node), 0) for k in program.schedule.kernels if k.kind == "matmul"]
    causal = shift == 0 and not flip
    assert sorted(modes) == ([1, 1, 2, 2, 3] if causal else [0] * 5), program.describe()
    # the softmax and its backward stop each row i at the diagonal (and write the zeros above it) exactly then
    bounded = program.source.count("for i2 in range(i1 + 1):"), program.source.count(f"in range(i1 + 1, {T}):")
    assert bounded == ((5, 2) if causal else (0, 0)), program.source


# ---- fusion: kernel counts -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_and_layer_norm_are_one_kernel_each(dtype):
    rng = np.random.default_rng(0)
    x = ir.load(buffer("x", (6, 33), dtype, rng))
    w, b = ir.load(buffer("w", (33,), dtype, rng)), ir.load(buffer("b", (33,), dtype, rng))
    program = check([softmax(x)], dtype=dtype)
    assert len(program.schedule.kernels) == 1
    # e^(x - max) is computed once per element: the sum's pass keeps it in a row buffer, the last pass reads it
    assert len(re.findall(r"\bexp(?:32)?\(", program.source)) == 1 and "row0[" in program.source, program.source
    program = check([layer_norm(x, w, b)], dtype=dtype)
    assert len(program.schedule.kernels) == 1 and program.schedule.scratch == []


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_every_value_a_pass_keeps_for_later_has_its_own_row_buffer(dtype):
    """softmax(e2) + softmax(e2) * e1 with e1 = exp(x / 2), e2 = exp(e1 / 2): the max's pass computes both exps and
    later stages read both back, so each needs a row buffer of its own (exercise 10's grader found two sharing
    one: the second overwrote the first)."""
    rng = np.random.default_rng(11)
    x = ir.load(buffer("x", (5, 7), dtype, rng))
    e1 = ir.unary("exp", ir.binary("mul", x, c(0.5, x)))
    e2 = ir.unary("exp", ir.binary("mul", e1, c(0.5, x)))
    s = softmax(e2)
    program = check([ir.binary("add", s, ir.binary("mul", s, e1))], dtype=dtype)
    buffers = re.findall(r"(row\d+) = np.empty", program.source)
    assert len(buffers) == 3 and len(set(buffers)) == 3, program.source


def test_linear_with_bias_and_gelu_is_one_kernel_and_chains_reuse_memory():
    rng = np.random.default_rng(1)
    x = ir.load(buffer("x", (2, 5, 8), "float32", rng))
    w1, b1 = ir.load(buffer("w1", (16, 8), "float32", rng)), ir.load(buffer("b1", (16,), "float32", rng))
    h = ir.matmul(ir.reshape(x, (10, 8)), ir.permute(w1, (1, 0)))
    h = gelu(ir.binary("add", h, ir.expand(ir.reshape(b1, (1, 16)), (10, 16))))
    program = check([ir.reshape(h, (2, 5, 16))], dtype="float32")
    assert len(program.schedule.kernels) == 1 and len(program.schedule.kernels[0].items) == 2
    # four square matmuls in a row: only two scratch buffers, reused turn about
    y = x2 = ir.load(buffer("y", (8, 8), "float64", rng))
    for _ in range(4):
        y = ir.unary("tanh", ir.matmul(y, x2))
    program = check([ir.reduce("sum", y, [0, 1])])
    assert len(program.schedule.scratch) <= 2


@pytest.mark.parametrize("terms", [passes.SHARED_READS, passes.SHARED_READS + 1, 9])
def test_a_sum_of_many_arrays_read_twice_is_stored_once(terms):
    """A residual stream: a running sum of `terms` arrays, read by two reductions. Past SHARED_READS arrays it is
    stored once and each reduction reads that one array; below, each recomputes it from its terms. Either way one
    pass over the rows does it all: the max along each row, and the sum down the columns beside it."""
    rng = np.random.default_rng(12)
    parts = [ir.load(buffer(f"a{i}", (6, 40), "float32", rng)) for i in range(terms)]
    stream = parts[0]
    for a in parts[1:]:
        stream = ir.binary("add", stream, a)
    outs = [ir.reduce("sum", stream, [0]), ir.reduce("max", ir.binary("mul", stream, stream), [1])]
    program = check(outs, dtype="float32")
    reads = [{id(v.srcs[0]) for it in k.items for v in it.leaves} for k in program.schedule.kernels]
    stored = terms > passes.SHARED_READS
    assert len(program.schedule.kernels) == 1 and sum(len(r & {id(a) for a in parts}) for r in reads) == terms
    assert bool(program.schedule.scratch) == stored


def test_assign_in_place_and_when_the_old_value_is_read_later():
    rng = np.random.default_rng(2)
    p, g = buffer("p", (4, 3), "float64", rng), buffer("g", (4, 3), "float64", rng)
    new = ir.binary("sub", ir.load(p), ir.binary("mul", c(0.1, ir.load(g)), ir.load(g)))
    program = check([ir.reduce("sum", ir.load(g), [0])], [ir.assign(ir.load(p), new)])
    assert program.schedule.copies == []  # written straight into p
    old_later = ir.reduce("sum", ir.matmul(ir.permute(ir.load(p), (1, 0)), ir.load(p)), [0, 1])
    program = check([new, old_later], [ir.assign(ir.load(p), new)])
    with pytest.raises(ValueError, match="must be a C-contiguous float64 array of shape"):
        program([np.zeros((3, 4)), np.zeros((4, 3))])


def test_an_adam_update_is_one_kernel_that_writes_in_place():
    """Adam's moments m' = 0.9 m + 0.1 g and v' = 0.99 v + 0.01 g^2 are assigned to m and v and read by p's update.
    The update reads them where their assigns wrote them (not recomputed from the old m and v), so each old value
    is read only by the stage that overwrites it: every assign is in place, with no copy at the end. The gradient
    they read is scaled (as clipping does) and is also an output, stored anyway: they read it back too. So the four
    same-shaped stages are one kernel (one pass over memory), fused side by side and one after another, and the sum
    of g down the columns joins that pass."""
    rng = np.random.default_rng(4)
    p, m, v, g = (buffer(name, (8, 5), "float64", rng) for name in ("p", "m", "v", "g"))
    G = ir.binary("mul", ir.load(g), c(0.5, ir.load(g)))
    m_new = ir.binary("add", ir.binary("mul", c(0.9, G), ir.load(m)), ir.binary("mul", c(0.1, G), G))
    v_new = ir.binary("add", ir.binary("mul", c(0.99, G), ir.load(v)), ir.binary("mul", c(0.01, G), ir.binary("mul", G, G)))
    step = ir.binary("div", m_new, ir.binary("add", ir.unary("sqrt", v_new), c(1e-8, G)))
    p_new = ir.binary("sub", ir.load(p), ir.binary("mul", c(0.01, G), step))
    effects = [ir.assign(ir.load(m), m_new), ir.assign(ir.load(v), v_new), ir.assign(ir.load(p), p_new)]
    program = check([ir.reduce("sum", ir.load(g), [0]), G], effects)
    assert program.schedule.copies == []
    [kern] = program.schedule.kernels
    assert len(kern.items) == 5 and [it.node.op == "sum" for it in kern.items].count(True) == 1
    reading_g = [it for kern in program.schedule.kernels for it in kern.items
                 if any(v.srcs[0].op == "load" and v.srcs[0].arg is g for v in it.leaves)]
    assert len(reading_g) == 2  # the scaled gradient and the sum: the moments read the scaled one back


def test_side_by_side_fusion_stops_at_a_few_stages():
    """Same-shaped updates next to each other are fused side by side, but at most SIDE_BY_SIDE stages to a kernel:
    numba's compile time grows faster than the kernel (every bias's update in one kernel took 9 s)."""
    from teenygrad.compiler.schedule import SIDE_BY_SIDE
    rng = np.random.default_rng(5)
    n = 2 * SIDE_BY_SIDE + 3
    ps, gs = ([buffer(f"{x}{i}", (7,), "float64", rng) for i in range(n)] for x in ("p", "g"))
    effects = [ir.assign(ir.load(p), ir.binary("sub", ir.load(p), ir.binary("mul", c(0.1, ir.load(g)), ir.load(g))))
               for p, g in zip(ps, gs)]
    program = check([ir.reduce("sum", ir.load(gs[0]), [0])], effects)
    stages = [len(k.items) for k in program.schedule.kernels]  # the sum, then the n updates
    assert sum(stages) == n + 1 and max(stages) == SIDE_BY_SIDE and len(stages) == 3, program.describe()


def test_arange_cat_and_int_masks():
    rng = np.random.default_rng(3)
    x = ir.load(buffer("x", (5, 5), "float32", rng))
    causal = ir.binary("lt", ir.arange((5, 5), 0), ir.arange((5, 5), 1))  # j > i: masked
    masked = ir.where(causal, ir.const(float("-inf"), "float32", (5, 5)), x)
    check([softmax(masked), ir.cat([x, masked], 1), ir.unary("cast", causal, "float32")], dtype="float32")


def transformer_block(B, T, C, nh, dtype, rng):
    """Chapter 9's block from primitives: layer norm, q k v heads, causal softmax, projection, MLP with GELU."""
    def buf(name, shape, scale=1.0):
        return ir.load(ir.Buffer(name, shape, dtype, (rng.standard_normal(shape) * scale).astype(dtype)))

    def linear(h, w, b):
        bias = ir.expand(ir.reshape(b, (1, w.shape[0])), (h.shape[0], w.shape[0]))
        return ir.binary("add", ir.matmul(h, ir.permute(w, (1, 0))), bias)
    x, hs = buf("x", (B, T, C)), C // nh
    h = layer_norm(ir.reshape(x, (B * T, C)), buf("ln1w", (C,)), buf("ln1b", (C,)))
    qkv = ir.reshape(linear(h, buf("wqkv", (3 * C, C), C ** -0.5), buf("bqkv", (3 * C,))), (B, T, 3, nh, hs))
    q, k, v = (ir.permute(ir.reshape(ir.slice_(qkv, ((0, B, 1), (0, T, 1), (i, i + 1, 1), (0, nh, 1), (0, hs, 1))),
                                     (B, T, nh, hs)), (0, 2, 1, 3)) for i in range(3))
    s = ir.matmul(q, ir.permute(k, (0, 1, 3, 2)))
    s = ir.binary("mul", s, c(hs ** -0.5, s))
    mask = ir.binary("lt", ir.arange(s.shape, 2), ir.arange(s.shape, 3))
    p = softmax(ir.where(mask, ir.const(float("-inf"), dtype, s.shape), s))
    y = ir.reshape(ir.permute(ir.matmul(p, v), (0, 2, 1, 3)), (B * T, C))
    x2 = ir.binary("add", ir.reshape(x, (B * T, C)), linear(y, buf("wo", (C, C), C ** -0.5), buf("bo", (C,))))
    m = gelu(linear(layer_norm(x2, buf("ln2w", (C,)), buf("ln2b", (C,))), buf("w1", (4 * C, C), C ** -0.5),
                    buf("b1", (4 * C,))))
    out = ir.binary("add", x2, linear(m, buf("w2", (C, 4 * C), (4 * C) ** -0.5), buf("b2", (C,))))
    return ir.reshape(out, (B, T, C))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_a_transformer_block_is_nine_kernels_and_matches_the_oracle(dtype):
    program = check([transformer_block(2, 8, 16, 2, dtype, np.random.default_rng(6))], dtype=dtype)
    # layer norm; qkv matmul + bias; q k^T; scale, mask, softmax; p v, written with the heads side by side (no
    # copy); projection; residual + layer norm; MLP up + bias + GELU; MLP down + bias + residual
    assert len(program.schedule.kernels) == 9
    assert list(program.schedule.writes.values()) == [(128, 8, 16, 1)]  # (B, nh, T, hs) stored as (B, T, nh, hs)
    times = program.profile([b.array for b in program.inputs], repeats=1)
    assert len(times) == 9 and all(t >= 0 for t in times)


def test_outputs_that_are_loads_constants_or_repeated_and_assigns_that_swap_buffers():
    rng = np.random.default_rng(8)
    x, y = ir.load(buffer("x", (3, 4), "float64", rng)), ir.load(buffer("y", (3, 4), "float64", rng))
    e = ir.unary("exp", x)
    program = check([x, ir.const(2.0, "float64", (2, 2)), e, e, ir.permute(y, (1, 0))],
                    [ir.assign(x, y), ir.assign(y, ir.binary("add", x, e))])  # each reads the other's old value
    assert len(program.schedule.copies) == 1  # x's new value waits in scratch until y's update has read x
    # run_flat (what a compiled function calls: flat arrays in and out, nothing checked) gives the same values,
    # each output its own array (the repeated one copied), and does the same assigns
    arrays = [np.array(b.array) for b in program.inputs]
    checked = program([a.copy() for a in arrays])
    flat = [a.reshape(-1) for a in arrays]
    outs = program.run_flat(flat)
    assert [o.shape for o in outs] == [(n.size,) for n in program.outputs] and outs[2] is not outs[3]
    for got, want in zip(outs, checked):
        np.testing.assert_array_equal(got, want.reshape(-1))
    np.testing.assert_array_equal(arrays[0], ir.evaluate([ir.unary("neg", ir.unary("neg", y))])[0])  # x = old y
    empty = ir.slice_(x, ((0, 0, 1), (0, 4, 1)))
    check([ir.reduce("sum", empty, [0]), ir.reduce("max", empty, [0]),
           ir.matmul(ir.slice_(x, ((0, 3, 1), (0, 0, 1))), ir.slice_(y, ((0, 0, 1), (0, 4, 1))))])


def test_parallel_kernels_match_the_oracle():
    """Under force_path("parallel") every kernel with more than one outer index is generated with a parallel
    driver: uneven chunks, matmul blocks of rows with an epilogue, column reductions, a cat, in-place assigns."""
    rng = np.random.default_rng(9)
    with force_path("parallel"):
        x = ir.load(buffer("x", (3, 17, 10), "float32", rng))
        w = ir.load(buffer("w", (10, 10), "float32", rng))
        h = ir.unary("tanh", ir.matmul(x, ir.expand(ir.reshape(w, (1, 10, 10)), (3, 10, 10))))
        flat = ir.reshape(x, (51, 10))
        p = ir.load(buffer("p", (51, 10), "float32", rng))
        program = check([softmax(h), ir.reduce("sum", flat, [0]), ir.reduce("max", x, [0, 1]),
                         ir.cat([ir.unary("neg", x), h], 1)],
                        [ir.assign(p, ir.binary("mul", p, flat))], dtype="float32")
    assert "parallel_for(ADDRESS" in program.source


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(1, 40), st.integers(1, 20), st.sampled_from(["serial", "parallel"]))
def test_a_layer_norms_backward_is_one_pass_for_dx_and_the_weights_gradients(R, C, path):
    """dx of a layer norm is computed row by row; dw = sum over rows of g * xhat and db = sum over rows of g are
    sums down the columns of the same (R, C) elements. They share a pass over the rows (chapter 9's hand kernel does
    all three in one): in a row of accumulators per chunk of rows, added up after. Checked against the numpy
    oracle, on one thread and on chunks of rows shared among threads."""
    rng = np.random.default_rng(R * 100 + C)
    x, g = (ir.load(buffer(name, (R, C), "float64", rng)) for name in ("x", "g"))
    w = ir.load(buffer("w", (C,), "float64", rng))
    n = ir.const(float(C), "float64", (R, 1))
    mean = ir.expand(ir.binary("div", ir.reduce("sum", x, [1]), n), (R, C))
    d = ir.binary("sub", x, mean)
    var = ir.binary("div", ir.reduce("sum", ir.binary("mul", d, d), [1]), n)
    rstd = ir.expand(ir.unary("recip", ir.unary("sqrt", ir.binary("add", var, ir.const(1e-5, "float64", (R, 1))))),
                     (R, C))
    xhat, gw = ir.binary("mul", d, rstd), ir.binary("mul", g, ir.expand(ir.reshape(w, (1, C)), (R, C)))
    a = ir.expand(ir.binary("div", ir.reduce("sum", gw, [1]), n), (R, C))
    b = ir.expand(ir.binary("div", ir.reduce("sum", ir.binary("mul", gw, xhat), [1]), n), (R, C))
    dx = ir.binary("mul", rstd, ir.binary("sub", ir.binary("sub", gw, a), ir.binary("mul", xhat, b)))
    dw, db = ir.reduce("sum", ir.binary("mul", g, xhat), [0]), ir.reduce("sum", g, [0])
    with force_path(path):
        program = check([dx, dw, db])
    if R > 1 and C > 1:  # the two column sums are stages of a kernel that loops over rows
        [kern] = [k for k in program.schedule.kernels if any(map(schedule.is_column, k.items))]
        assert len(kern.items) >= 4 and sum(map(schedule.is_column, kern.items)) == 2, program.describe()
        assert ("band = " in program.source) == (path == "parallel")  # partial sums per chunk of rows


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(2, 3), st.integers(2, 9), st.integers(2, 9), st.integers(2, 9), st.sampled_from(["serial", "parallel"]))
def test_a_bias_gradient_shares_the_pass_that_makes_its_dy(B, T, C, K, path):
    """A bias's gradient is the sum over rows of dy. When dy is a product's epilogue (dh = (g W^T) * f'(h), the MLP's
    backward), the sum shares the epilogue's pass over the product; when dy comes out of a loop over (B, T, C) and
    the sum reads it as (B*T, C), it shares that loop, through the reshape."""
    rng = np.random.default_rng(B * 1000 + T * 100 + C * 10 + K)
    g, w, h = (ir.load(buffer(name, shape, "float64", rng)) for name, shape in
               (("g", (B * T, K)), ("w", (C, K)), ("h", (B * T, C))))
    dh = ir.binary("mul", ir.matmul(g, ir.permute(w, (1, 0))), ir.unary("tanh", h))
    x = ir.load(buffer("x", (B, T, C), "float64", rng))
    y = ir.binary("mul", x, ir.unary("tanh", x))
    with force_path(path):
        program = check([dh, ir.reduce("sum", dh, [0]), y, ir.reduce("sum", ir.reshape(y, (B * T, C)), [0])])
    kinds = [[it.node.op for it in k.items] for k in program.schedule.kernels]
    assert sorted(kinds) == [["contiguous", "sum"], ["matmul", "contiguous", "sum"]], program.describe()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_wide_column_reductions_are_shared_by_columns(dtype):
    """A reduction over leading axes with many columns (the position embedding's gradient: (B, T, C) summed over B)
    is shared among threads by blocks of columns, every row at once: no partial sums to add up afterwards. A
    reduction over axes of one element is no reduction at all."""
    rng = np.random.default_rng(10)
    x = ir.load(buffer("x", (16, 65, 129), dtype, rng))
    outs = [ir.reduce("sum", x, [0]), ir.reduce("max", ir.binary("mul", x, x), [0]), ir.reduce("sum", x, [0, 1])]
    program = check(outs, dtype=dtype)
    assert program.source.count("for o in range(ch * 8385 // 16, (ch + 1) * 8385 // 16):") == 4, program.source
    assert "p0[ch * 8385" not in program.source  # ... and the sum over (16, 65) still in bands of rows
    one = ir.load(buffer("one", (5, 1, 7), dtype, rng))
    assert ir.reduce("sum", one, [1]) is one and ir.reduce("max", one, []) is one


def test_two_assigns_to_one_buffer_are_refused():
    p = ir.load(buffer("p", (3,), "float64", np.random.default_rng(7)))
    with pytest.raises(ValueError, match="assigned twice"):
        compile_graph([], [ir.assign(p, ir.unary("neg", p)), ir.assign(p, ir.unary("exp", p))])


# ---- debugging, the cache, the plain-Python fallback ----------------------------------------------------

def test_debug_levels_print_schedule_ir_and_source(monkeypatch, capsys):
    x = ir.load(buffer("x", (3, 7), "float64", np.random.default_rng(4)))
    monkeypatch.setenv("TEENYGRAD_DEBUG", "3")
    program = compile_graph([softmax(x)])
    out = capsys.readouterr().out
    assert "IR after fold_views" in out and "1 kernels" in out and "def k0(" in out
    assert program.describe() in out and program.source in out
    _, shown = run_passes([softmax(x)])
    assert [name for name, _ in shown][:2] == ["captured", "fold_constants"]


SCRIPT = textwrap.dedent("""
    import numpy as np, sys
    from teenygrad.compiler import ir
    from teenygrad.compiler.backend import compile_graph
    x = ir.Buffer("x", (4, 6), "float32", np.linspace(-1, 1, 24, dtype="float32").reshape(4, 6))
    w = ir.Buffer("w", (6, 8), "float32", np.linspace(-1, 1, 48, dtype="float32").reshape(6, 8))
    y = ir.unary("tanh", ir.matmul(ir.load(x), ir.load(w)))
    m = ir.expand(ir.reduce("max", y, [1]), y.shape)
    out = ir.reduce("sum", ir.unary("exp", ir.binary("sub", y, m)), [1])
    p = compile_graph([out])
    got = p([x.array, w.array])[0]
    assert np.allclose(got, ir.evaluate([out])[0], rtol=1e-5), got
    module = sys.modules[p._run.__module__]
    stats = [getattr(module, k).stats for k in dir(module) if k[0] == "k" and hasattr(getattr(module, k), "stats")]
    print("HITS", sum(sum(s.cache_hits.values()) for s in stats), "MISSES", sum(sum(s.cache_misses.values()) for s in stats))
""")


def _run(env):
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, **env}, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_a_second_process_hits_the_disk_cache(tmp_path):
    cold = _run({"TEENYGRAD_CACHE_DIR": str(tmp_path)})
    warm = _run({"TEENYGRAD_CACHE_DIR": str(tmp_path)})
    # one generated numba kernel: the max and sum of exp(tanh(.)) fused (the matmul runs chapter 3's kernel,
    # compiled once with the package, from a plain Python function of the generated module)
    assert "HITS 0 MISSES 1" in cold and "HITS 1 MISSES 0" in warm, (cold, warm)
    assert len(list(tmp_path.glob("graph_*.py"))) == 1


def test_the_plain_python_fallback_runs_the_same_source(tmp_path):
    out = _run({"TEENYGRAD_CACHE_DIR": str(tmp_path), "TEENYGRAD_JIT": "0"})
    assert "HITS 0 MISSES 0" in out  # no numba dispatcher: plain Python ran (and matched the oracle)


MANY = textwrap.dedent("""
    import subprocess, numpy as np
    from teenygrad.compiler import ir
    from teenygrad.compiler.backend import compile_graph
    started = []
    popen = subprocess.Popen
    subprocess.Popen = lambda *a, **k: started.append(1) or popen(*a, **k)
    ops = [("exp",), ("tanh",), ("neg",), ("sqrt",), ("log",), ("recip",), ("exp", "tanh"), ("sqrt", "log")]
    outs = []
    for i, chain in enumerate(ops):  # eight different kernels: enough to share the compiling among processes
        x = ir.Buffer(f"x{i}", (4 + i, 6), "float64", np.linspace(1, 2, 6 * (4 + i)).reshape(4 + i, 6))
        y = ir.load(x)
        for op in chain:
            y = ir.unary(op, y)
        outs.append(ir.reduce("sum", y, [1]))
    compile_graph(outs)
    print("HELPERS", len(started))
""")


def test_a_warm_cache_under_numba_cache_dir_starts_no_compile_helpers(tmp_path):
    """Cold, the kernels of a graph are compiled by this process and helpers at once; warm, they load from
    numba's cache, wherever numba keeps it (here NUMBA_CACHE_DIR, as in a grading sandbox), with no helper."""
    env = {**os.environ, "TEENYGRAD_CACHE_DIR": str(tmp_path / "graphs"), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    runs = [subprocess.run([sys.executable, "-c", MANY], capture_output=True, text=True, cwd=REPO, env=env,
                           timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    cold, warm = (int(r.stdout.split()[-1]) for r in runs)
    assert (cold > 0 or len(os.sched_getaffinity(0)) == 1) and warm == 0, (cold, warm)
