"""Chapter 5's scalar autograd: Value gradients against finite differences on random expressions (reused
nodes and diamonds included), the topological sort on random DAGs, the exercise seams (use_op, order_fn),
clear errors, and the Value MLP on XOR and the digits."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import assume, given, reject, settings
from hypothesis import strategies as st

from teenygrad.value import RULES, Value, check_topological, gradient_check, topological_order, use_op
from teenygrad.value_nn import MLP, cross_entropy, sgd_step

# --- random expressions (shared with test_ch05_tape.py) ----------------------------------------------------------
# Each op is applied to nodes drawn from a pool that grows as the program runs, so nodes get reused; the
# root sums the whole pool, so every node has several parents (diamonds everywhere). Wrappers keep log's
# and div's operands positive; Python numbers appear on both sides of the binary operators.
SMOOTH_UNARY = {
    "neg": lambda a: -a, "exp": lambda a: a.exp(), "log": lambda a: (a * a + 0.5).log(), "tanh": lambda a: a.tanh(),
    "sigmoid": lambda a: a.sigmoid(), "square": lambda a: a ** 2, "cube": lambda a: a ** 3,
    "rsqrt": lambda a: (a * a + 0.5) ** -1.5, "radd": lambda a: 1.5 + a, "rsub": lambda a: 2.5 - a,
    "rmul": lambda a: 3 * a, "rdiv": lambda a: 1.0 / (a * a + 1.0), "addc": lambda a: a + 0.25,
    "subc": lambda a: a - 2, "mulc": lambda a: a * -0.5, "divc": lambda a: a / 4.0,
}
SMOOTH_BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                 "div": lambda a, b: a / (b * b + 1.0)}
KINKED = {"relu": lambda a, b: a.relu(), "max": lambda a, b: a.max(b)}
SMOOTH = {**{k: (lambda f: lambda a, b: f(a))(f) for k, f in SMOOTH_UNARY.items()}, **SMOOTH_BINARY}
ALL_OPS = {**SMOOTH, **KINKED}


def programs(ops: dict) -> st.SearchStrategy:
    return st.lists(st.tuples(st.sampled_from(sorted(ops)), st.integers(0, 50), st.integers(0, 50)),
                    min_size=1, max_size=10)


leaf_values = st.lists(st.floats(-1.5, 1.5, allow_nan=False), min_size=1, max_size=4)


def build(program: list, leaves: list[Value], ops: dict = ALL_OPS) -> tuple[Value, list[Value]]:
    """Run `program` on `leaves`; return (root, every node made)."""
    pool = list(leaves)
    for name, i, j in program:
        try:
            pool.append(ops[name](pool[i % len(pool)], pool[j % len(pool)]))
        except OverflowError:  # exp of a huge number: no graph to compare (sane() rejects the merely large)
            reject()
    root = pool[0]
    for v in pool[1:]:
        root = root + v
    return root, pool


def sane(nodes: list[Value], limit: float = 1e3) -> bool:
    return all(math.isfinite(v.data) and abs(v.data) < limit for v in nodes)


# --- gradients -----------------------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(programs(SMOOTH), leaf_values)
def test_gradients_match_finite_differences(program, xs):
    root, pool = build(program, [Value(x) for x in xs], SMOOTH)
    assume(sane(pool))
    analytic, numeric = gradient_check(lambda leaves: build(program, leaves, SMOOTH)[0], xs, eps=1e-6)
    for a, n in zip(analytic, numeric):
        assert abs(a - n) <= 1e-5 * (1 + abs(a)), (analytic, numeric)


@settings(max_examples=100, deadline=None)
@given(programs(ALL_OPS), leaf_values)
def test_kinked_ops_match_finite_differences_away_from_kinks(program, xs):
    root, pool = build(program, [Value(x) for x in xs])
    assume(sane(pool))
    # skip draws where a relu or max input sits within 1e-4 of its kink (finite differences straddle it)
    for v in topological_order(root):
        if v.op == "relu":
            assume(abs(v.children[0].data) > 1e-4)
        if v.op == "max":  # max(a, a) is smooth: its gradient is 1
            assume(v.children[0] is v.children[1] or abs(v.children[0].data - v.children[1].data) > 1e-4)
    analytic, numeric = gradient_check(lambda leaves: build(program, leaves)[0], xs, eps=1e-7)
    for a, n in zip(analytic, numeric):
        assert abs(a - n) <= 1e-4 * (1 + abs(a)), (analytic, numeric)


@pytest.mark.parametrize("name, point", [
    ("add", (0.3, -1.2)), ("sub", (0.3, -1.2)), ("mul", (0.3, -1.2)), ("div", (0.3, -1.2)), ("pow", (1.7, 2.5)),
    ("neg", (0.4,)), ("exp", (0.4,)), ("log", (0.4,)), ("tanh", (0.4,)), ("relu", (0.4,)), ("relu", (-0.4,)),
    ("sigmoid", (0.4,)), ("sigmoid", (-30.0,)), ("max", (0.3, -1.2)), ("max", (-1.2, 0.3))])
def test_each_rule_local_gradients(name, point):
    """Every rule's local gradients are the partial derivatives of its own forward (the exponent of pow is fixed)."""
    out, grads = RULES[name](*point)
    n_operands = 1 if name == "pow" else len(point)
    assert len(grads) == n_operands
    for k in range(n_operands):
        up, down = list(point), list(point)
        up[k] += 1e-6
        down[k] -= 1e-6
        numeric = (RULES[name](*up)[0] - RULES[name](*down)[0]) / 2e-6
        assert grads[k] == pytest.approx(numeric, rel=1e-6, abs=1e-8), (name, k)


def test_diamond_accumulates():
    x = Value(3.0)
    y = x * x + x  # x feeds mul twice and add once: dy/dx = 2x + 1
    y.backward()
    assert y.data == 12.0 and x.grad == 7.0
    a = Value(2.0)
    b, c = a * 3, a.exp()  # a diamond: a -> b, a -> c, (b, c) -> d
    d = b * c
    d.backward()
    assert a.grad == pytest.approx(3 * math.exp(2) + 6 * math.exp(2))


def test_python_numbers_on_either_side():
    x = Value(2.0)
    for expr, value, grad in [(lambda: 1 + x, 3.0, 1.0), (lambda: x + 1, 3.0, 1.0), (lambda: 5 - x, 3.0, -1.0),
                              (lambda: x - 5, -3.0, 1.0), (lambda: 3 * x, 6.0, 3.0), (lambda: x * 3, 6.0, 3.0),
                              (lambda: 8 / x, 4.0, -2.0), (lambda: x / 8, 0.25, 0.125), (lambda: x ** 3, 8.0, 12.0),
                              (lambda: -x, -2.0, -1.0)]:
        x.grad = 0.0
        y = expr()
        y.backward()
        assert (y.data, x.grad) == (value, grad)


def test_backward_twice_accumulates_on_leaves_only():
    x = Value(1.5)
    h = x.tanh()
    y = h * h
    y.backward()
    first, h_grad = x.grad, h.grad
    y.backward()
    assert h.grad == h_grad  # interior nodes restart from zero
    assert x.grad == 2 * first  # leaves accumulate, like any framework's parameters


def test_deep_chain_has_no_recursion_limit():
    x = Value(0.5)
    y = x
    for _ in range(30_000):
        y = y + x * 1.0
    y.backward()
    assert x.grad == 30_001.0


def test_errors_are_clear():
    x = Value(2.0)
    with pytest.raises(TypeError, match="exponent must be a Python number"):
        x ** Value(2.0)
    with pytest.raises(TypeError, match="number \\*\\* Value"):
        2 ** x
    with pytest.raises(TypeError, match="cannot combine a Value with str"):
        x + "1"
    with pytest.raises(ValueError, match="math domain error"):
        Value(-1.0).log()
    with pytest.raises(KeyError, match="unknown op name.*sqrt"):
        with use_op(sqrt=lambda a: (a, (1.0,))):
            pass
    with pytest.raises(ValueError, match="returned 1 local gradients for 2 operands"):
        with use_op(mul=lambda a, b: (a * b, (b,))):
            x * x


# --- the topological sort ------------------------------------------------------------------------------------

def random_dag(rng: random.Random, n_leaves: int, n_ops: int) -> tuple[Value, list[Value]]:
    pool = [Value(rng.random()) for _ in range(n_leaves)]
    for _ in range(n_ops):
        k = rng.choice([1, 2])
        children = tuple(rng.choice(pool) for _ in range(k))  # may pick the same node twice
        pool.append(Value(0.0, children, "add" if k == 2 else "neg", (1.0,) * k))
    root = Value(0.0, tuple(pool[-3:]), "sum", (1.0,) * len(pool[-3:]))
    return root, pool


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(0, 60))
def test_topological_order_is_valid_on_random_dags(seed, n_leaves, n_ops):
    root, _ = random_dag(random.Random(seed), n_leaves, n_ops)
    order = topological_order(root)
    assert check_topological(order, root) is None
    assert order[-1] is root
    assert len({id(v) for v in order}) == len(order)
    # exactly the nodes reachable from root
    reachable, stack = set(), [root]
    while stack:
        v = stack.pop()
        if id(v) not in reachable:
            reachable.add(id(v))
            stack.extend(v.children)
    assert {id(v) for v in order} == reachable


def test_check_topological_explains_bad_orders():
    a, b = Value(1.0), Value(2.0)
    c = a * b
    d = c + a
    good = topological_order(d)
    assert check_topological(good, d) is None
    assert "before its child" in check_topological([a, c, b, d], d)
    assert "appears twice" in check_topological([a, b, a, c, d], d)
    assert "graph has 4" in check_topological([a, b, d], d)


# --- the exercise seams: a learner's op or sort swapped in -----------------------------------------------------

def recursive_order(root: Value) -> list[Value]:
    """What a learner might write: the textbook recursive DFS."""
    order, seen = [], set()

    def visit(v):
        if id(v) not in seen:
            seen.add(id(v))
            for c in v.children:
                visit(c)
            order.append(v)
    visit(root)
    return order


def bfs_order(root: Value) -> list[Value]:
    """A plausible wrong answer: breadth-first from the root, reversed (a node can come before a child)."""
    order, seen, queue = [], {id(root)}, [root]
    while queue:
        v = queue.pop(0)
        order.append(v)
        for c in v.children:
            if id(c) not in seen:
                seen.add(id(c))
                queue.append(c)
    return order[::-1]


def grads_with(make, order_fn=None, **rules):
    leaves = [Value(0.7), Value(-0.4), Value(1.3)]
    with use_op(**rules):
        root = make(leaves)
    root.backward(order_fn=order_fn)
    return [root.data] + [v.grad for v in leaves]  # the output, then its gradients


def seam_expr(v):
    x, y, z = v
    a = x * y
    b = a * z + a.tanh()   # a reused: a diamond
    return (b * x + 2 * y * z).sigmoid() * b


def test_use_op_with_a_correct_rule_reproduces_the_builtin():
    calls = []

    def my_mul(a, b):
        calls.append((a, b))
        return a * b, (b, a)

    assert grads_with(seam_expr, mul=my_mul) == grads_with(seam_expr)
    assert calls  # it really ran
    assert RULES["mul"] is not my_mul  # and was put back


@pytest.mark.parametrize("wrong", [lambda a, b: (a * b, (a, b)),          # local gradients swapped
                                   lambda a, b: (a * b, (b, 1.0)),        # one wrong
                                   lambda a, b: (a + b, (b, a))])         # forward wrong
def test_use_op_with_a_wrong_rule_does_not(wrong):
    assert grads_with(seam_expr, mul=wrong) != pytest.approx(grads_with(seam_expr))


def test_use_op_tanh_seam():
    def my_tanh(a):
        t = math.tanh(a)
        return t, (1 - t ** 2,)
    assert grads_with(seam_expr, tanh=my_tanh) == pytest.approx(grads_with(seam_expr), rel=1e-15)
    assert grads_with(seam_expr, tanh=lambda a: (math.tanh(a), (1 - a * a,))) != pytest.approx(grads_with(seam_expr))


def test_order_fn_seam():
    assert grads_with(seam_expr, order_fn=recursive_order) == grads_with(seam_expr)
    assert grads_with(seam_expr, order_fn=bfs_order) != pytest.approx(grads_with(seam_expr))
    leaves = [Value(0.7), Value(-0.4), Value(1.3)]
    root = seam_expr(leaves)
    assert recursive_order(root) == topological_order(root)  # the iterative sort gives the recursive order
    assert check_topological(bfs_order(root), root) is not None


# --- the Value MLP --------------------------------------------------------------------------------------------

def test_xor_trains_to_zero_error():
    X, Y = [[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]], [0.0, 1.0, 1.0, 0.0]
    model = MLP(2, [4, 1], act="tanh", seed=1)
    for _ in range(300):
        loss = Value(0.0)
        for x, y in zip(X, Y):
            loss = loss + (model(x)[0] - y) ** 2
        loss.backward()
        sgd_step(model.parameters(), 0.1)
    predictions = [round(model(x)[0].data) for x in X]
    assert predictions == [0, 1, 1, 0] and loss.data < 1e-3


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-50, 50), min_size=2, max_size=10), st.data())
def test_cross_entropy_matches_numpy(z, data):
    target = data.draw(st.integers(0, len(z) - 1))
    logits = [Value(v) for v in z]
    loss = cross_entropy(logits, target)
    loss.backward()
    zz = np.array(z)
    p = np.exp(zz - zz.max())
    p /= p.sum()
    assert loss.data == pytest.approx(-np.log(p[target]), rel=1e-12, abs=1e-12)
    onehot = np.eye(len(z))[target]
    assert np.allclose([v.grad for v in logits], p - onehot, atol=1e-12)
    # the one-hot form (what a tape is fed) is the same loss and gradients
    logits2 = [Value(v) for v in z]
    loss2 = cross_entropy(logits2, [Value(t) for t in onehot])
    loss2.backward()
    assert loss2.data == pytest.approx(loss.data, rel=1e-14, abs=1e-14)
    assert np.allclose([v.grad for v in logits2], [v.grad for v in logits], atol=1e-14)


def test_digits_mlp_learns_a_little():
    from teenygrad.datasets import load_digits
    X, y = load_digits()
    X = X[:40] / 16.0
    model = MLP(64, [16, 10], seed=0)
    params = model.parameters()

    def mean_loss():
        return sum(cross_entropy(model(list(x)), int(t)).data for x, t in zip(X, y)) / len(X)
    before = mean_loss()
    for _ in range(2):
        for x, t in zip(X, y):
            cross_entropy(model(list(x)), int(t)).backward()
            sgd_step(params, 0.1)
    assert mean_loss() < 0.7 * before
