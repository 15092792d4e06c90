"""Chapter 5's fusion pass (teenygrad.tape_fuse): a fused tape computes what the Value graph and the unfused
tape compute (values and the gradients of parameters and op slots to 1e-12; inputs and constants get 0), on
random multiply-add graphs with reused nodes and random MLPs; it fuses exactly the chains it may; it trains
like the unfused tape. No timing here: benchmarks/scalar_autograd.py measures the speed."""
from __future__ import annotations

import ast
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from teenygrad import tape as T
from teenygrad.tape_fuse import DOT, FusedTape, fuse
from teenygrad.value import Value, topological_order
from teenygrad.value_nn import MLP, cross_entropy, sgd_step

REPO = Path(__file__).resolve().parent.parent


def close(got, want, tol=1e-12) -> bool:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return bool(np.all(np.abs(got - want) <= tol * (1 + np.abs(want))))


def uses(root: Value) -> dict[int, int]:
    """How many operands name each node of root's graph."""
    count: dict[int, int] = {}
    for v in topological_order(root):
        for c in v.children:
            count[id(c)] = count.get(id(c), 0) + 1
    return count


def random_graph(seed: int):
    """Random multiply-add chains over params, inputs and a constant: heads or none, products on either side of
    the add, some intermediate sums and products reused elsewhere, x * x, one-term chains, unary ops between."""
    rng = random.Random(seed)
    params = [Value(rng.uniform(-1, 1)) for _ in range(rng.randint(1, 4))]
    inputs = [Value(rng.uniform(-1, 1)) for _ in range(rng.randint(0, 3))]
    pool = [*params, *inputs, Value(0.5)]
    for _ in range(rng.randint(1, 7)):
        if rng.random() < 0.7:  # a chain
            s = None if rng.random() < 0.3 else rng.choice(pool)
            for _ in range(rng.randint(1, 5)):
                x = rng.choice(pool)
                p = x * (x if rng.random() < 0.1 else rng.choice(pool))
                s = p if s is None else s + p if rng.random() < 0.7 else p + s
                if rng.random() < 0.15:
                    pool.append(s)  # an intermediate sum used elsewhere: it must keep its slot
                if rng.random() < 0.1:
                    pool.append(p)  # a product used elsewhere
            pool.append(s)
        else:
            v = rng.choice(pool)
            pool.append(rng.choice([v.tanh(), v.sigmoid(), v * v, v + rng.choice(pool), -v]))
    root = pool[0]
    for v in pool[1:]:
        root = root + v.tanh()
    return params, inputs, pool, root


def check_against_values(tape: FusedTape, root: Value, params, inputs, tol=1e-12):
    """Values, gradients of parameters and op slots as the Value graph's; inputs and constants 0."""
    root.backward()
    tape.data[tape.n_leaves:] = 0.0  # nothing left from compiling: forward recomputes every op
    assert close(tape.forward(), root.data, tol)
    assert close(tape.data, [v.data for v in tape.nodes], tol)
    tape.backward()
    assert close(tape.param_grads, [p.grad for p in params], tol)
    assert close(tape.grad[tape.n_leaves:], [v.grad for v in tape.nodes[tape.n_leaves:]], tol)
    assert np.all(tape.grad[tape.n_params:tape.n_leaves] == 0.0)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_fused_tape_matches_values_and_the_unfused_tape(seed):
    params, inputs, pool, root = random_graph(seed)
    assume(all(abs(v.data) < 1e3 for v in pool))
    plain = T.compile(root, inputs=inputs, params=params, schedule=seed % 2 == 0)  # by depth, or not
    tape = fuse(plain)
    assert isinstance(tape, FusedTape) and fuse(tape) is tape
    # the structure: operands before their node; no node used twice is fused away; everything fused is a MUL or
    # an ADD; the DOTs hold exactly the products that left the tape
    ops = np.arange(tape.n_leaves, len(tape))
    plain_op = tape.opcode[ops] != DOT
    assert np.all(tape.a[ops] < ops) and np.all(tape.b[ops][plain_op] < ops[plain_op])
    for i in ops[~plain_op]:
        terms = slice(tape.dot_start[tape.b[i]], tape.dot_start[tape.b[i] + 1])
        assert np.all(tape.dot_a[terms] < i) and np.all(tape.dot_b[terms] < i)
    on_tape = {id(v) for v in tape.nodes}
    count = uses(root)
    gone = [v for v in plain.nodes if id(v) not in on_tape]
    assert all(count.get(id(v), 0) == 1 and v.op in ("mul", "add") for v in gone)
    assert all(id(v) in on_tape for v in plain.nodes if count.get(id(v), 0) != 1)
    dots = tape.opcode == DOT
    assert len(tape.dot_start) == dots.sum() + 1 and tape.dot_start[-1] == len(tape.dot_a)
    products = sum(v.op == "mul" for v in gone)  # a chain of n products loses n - 1 adds, n - 2 without a head
    assert len(tape.dot_a) == products and len(gone) == 2 * products - dots.sum() - (tape.arg[dots] == 0).sum()
    check_against_values(tape, root, params, inputs)
    # and the unfused tape agrees on the parameters' gradients
    plain.forward()
    plain.backward()
    assert close(plain.param_grads, tape.param_grads)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_python_interpreter_and_fit_match(seed):
    params, inputs, pool, root = random_graph(seed)
    assume(all(abs(v.data) < 1e3 for v in pool))
    tape = fuse(T.compile(root, inputs=inputs, params=params))
    loss = tape.forward()
    tape.backward()
    grads = tape.grad.copy()
    tape.data[tape.n_leaves:] = 0.0
    assert tape.forward(python=True) == loss
    tape.backward(python=True)
    assert np.array_equal(tape.grad, grads)
    twin = fuse(T.compile(root, inputs=inputs, params=params))
    rows = np.random.default_rng(seed).uniform(-1, 1, size=(3, len(inputs)))
    losses = []
    for row in rows:
        tape.set_inputs(row)
        losses.append(tape.forward())
        tape.backward()
        tape.sgd_step(0.01)
    assert np.array_equal(twin.fit(rows, 0.01), losses)
    assert np.array_equal(twin.data, tape.data) and np.array_equal(twin.grad, tape.grad)


def test_what_is_fused_and_what_is_not():
    x, y, z, w, c = (Value(v) for v in (0.3, -0.7, 1.1, 0.4, 2.0))

    def dots(root):
        graph = {id(v) for v in topological_order(root)}
        inputs = [v for v in (x, y, z, w) if id(v) in graph]  # c stays a constant
        tape = fuse(T.compile(root, inputs=inputs))
        check_against_values(tape, root, [], inputs)
        is_dot = tape.opcode == DOT
        return tape, [int(tape.dot_start[d + 1] - tape.dot_start[d]) for d in tape.b[is_dot]], tape.arg[is_dot]

    tape, lengths, heads = dots(z + x * y)  # one term and a head
    assert len(tape) == 4 and lengths == [1] and list(heads) == [1.0]
    assert "3 = dot     2 + 0*1  (1 products)" in tape.listing()
    _, lengths, heads = dots(x * y + z * w)  # no head: the first product starts the sum
    assert lengths == [2] and list(heads) == [0.0]
    _, lengths, _ = dots(z * w + (x * y + c))  # the product on the left of the add
    assert lengths == [2]
    _, lengths, _ = dots(x * y)  # a product alone: no add, nothing to fuse
    assert lengths == []
    p = x * y
    tape, lengths, _ = dots(z + p + w * z + p)  # p used twice: it keeps its slot, and ends the chain at it
    assert lengths == [1] and id(p) in {id(v) for v in tape.nodes}
    s = z + x * y
    t = s + w * w
    tape, lengths, _ = dots(t + t.tanh() + s * s)  # s and t are each used twice: three DOTs of one product
    assert lengths == [1, 1, 1] and {id(s), id(t)} <= {id(v) for v in tape.nodes}
    weight = Value(0.9)  # pixel * weight: the product is turned round, so the gradient-free pixel is on the b side
    root = c + x * weight + y * weight
    tape = fuse(T.compile(root, inputs=[x, y], params=[weight]))
    assert list(tape.dot_a) == [0, 0] and list(tape.dot_b) == [1, 2] and list(tape.grad_b) == [0]
    check_against_values(tape, root, [weight], [x, y])
    p0, p1, p2 = Value(0.2), Value(-0.6), Value(0.8)
    root = c + p0 * p1 + p1 * p2  # operands in consecutive slots on both sides (0, 1 and 1, 2), overlapping
    tape = fuse(T.compile(root, params=[p0, p1, p2]))
    assert list(tape.contiguous) == [1] and list(tape.grad_b) == [1]
    check_against_values(tape, root, [p0, p1, p2], [])
    p0, p1, p2 = Value(0.2), Value(-0.6), Value(0.8)  # fresh leaves: a Value leaf accumulates its grad
    root = c + p0 * p1 + p2 * p1  # not consecutive on the b side
    tape = fuse(T.compile(root, params=[p0, p1, p2]))
    assert list(tape.contiguous) == [0]
    check_against_values(tape, root, [p0, p1, p2], [])
    yz = y * z
    with pytest.raises(ValueError, match="not on this tape"):  # fused away
        fuse(T.compile(x + yz + w * w, inputs=[x, y, z, w])).slots([yz])


def digits_like(nin, sizes, act, seed):
    model = MLP(nin, sizes, act, seed=seed)
    xs, ts = [Value(0.0) for _ in range(nin)], [Value(0.0) for _ in range(sizes[-1])]
    return model, xs, ts, cross_entropy(model(xs), ts)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 9), st.lists(st.integers(1, 6), min_size=1, max_size=3), st.sampled_from(["tanh", "relu",
       "sigmoid"]), st.integers(0, 10**6))
def test_fused_mlp_trains_like_values(nin, hidden, act, seed):
    sizes = [*hidden, 3]
    model, xs, ts, loss = digits_like(nin, sizes, act, seed)
    tape = fuse(T.compile(loss, inputs=xs + ts, params=model.parameters()))
    n_neurons = sum(sizes)
    assert (tape.opcode == DOT).sum() == n_neurons + 1  # one DOT per neuron, and the one-hot pick
    assert len(tape.dot_a) == sum(a * b for a, b in zip([nin, *sizes], sizes)) + sizes[-1]
    rng = np.random.default_rng(seed)
    params = model.parameters()
    for _ in range(3):  # per-example SGD, side by side with Values
        x, target = rng.uniform(-1, 1, nin), int(rng.integers(sizes[-1]))
        tape.set_inputs(np.concatenate([x, np.eye(sizes[-1])[target]]))
        fused_loss = tape.forward()
        tape.backward()
        value_loss = cross_entropy(model(list(x)), target)
        value_loss.backward()
        assert close(fused_loss, value_loss.data)
        assert close(tape.param_grads, [p.grad for p in params])
        tape.sgd_step(0.1)
        sgd_step(params, 0.1)
        assert close(tape.param_data, [p.data for p in params], 1e-11)


def test_fused_digits_tape_and_errors():
    model, xs, ts, loss = digits_like(64, [16, 10], "tanh", 0)
    plain = T.compile(loss, inputs=xs + ts, params=model.parameters())
    tape = fuse(plain)
    assert (len(plain), len(tape), len(tape.dot_a), int((tape.opcode == DOT).sum())) == (3727, 1367, 1194, 27)
    assert repr(tape) == "FusedTape(1210 params, 74 inputs, 0 constants, 83 ops, 27 dots of 1194 products)"
    # the first layer's products are weight * pixel: gradients go to the weights only
    first = tape.b[np.flatnonzero(tape.opcode == DOT)[:16]]
    assert not tape.grad_b[first].any() and tape.grad_b[tape.b[tape.opcode == DOT][16:26]].all()
    assert tape.contiguous.all()  # a neuron's weights are consecutive slots, and so are its layer's inputs
    with pytest.raises(ValueError, match="override opcodes on the unfused tape"):
        tape.forward(overrides={"tanh": (None, None)})
    with pytest.raises(ValueError, match="expected rows of 74 input values"):
        tape.fit(np.zeros((2, 64)), 0.1)
    rows = np.random.default_rng(0).uniform(0, 1, size=(30, 74))
    assert close(tape.fit(rows, 0.05), plain.fit(rows, 0.05), 1e-9)
    assert close(tape.param_data, plain.param_data, 1e-9)
    again = fuse(plain)  # a trained tape fuses with the weights it has now
    assert np.array_equal(again.param_data, plain.param_data)
    for t in (again, plain):
        t.set_inputs(rows[0])
    assert again.forward() == plain.forward()  # the same sums in the same order: the same bits
    again.backward()
    plain.backward()
    assert close(again.param_grads, plain.param_grads)
    again.backward(accumulate=True)
    assert close(again.param_grads, 2 * plain.param_grads)


def test_fused_tape_without_jit_in_a_subprocess():
    script = """
import numpy as np
from teenygrad import tape as T
from teenygrad.kernels import jit as _jit
from teenygrad.tape_fuse import fuse
from teenygrad.value import Value
from teenygrad.value_nn import MLP, cross_entropy
assert not _jit.JIT_ENABLED
model = MLP(3, [4, 3], seed=2)
xs, ts = [Value(0.0) for _ in range(3)], [Value(0.0) for _ in range(3)]
tape = fuse(T.compile(cross_entropy(model(xs), ts), inputs=xs + ts, params=model.parameters()))
x = [0.5, -1.0, 2.0]
tape.set_inputs(x + [0.0, 1.0, 0.0])
loss = tape.forward(); tape.backward()
fresh = cross_entropy(model(x), 1); fresh.backward()
assert abs(loss - fresh.data) < 1e-12, (loss, fresh.data)
assert np.allclose(tape.param_grads, [p.grad for p in model.parameters()], rtol=1e-12, atol=1e-14)
losses = tape.fit(np.array([x + [0.0, 1.0, 0.0]] * 2), 0.1)
assert abs(losses[0] - loss) < 1e-12 and losses[1] < losses[0]
print("ok", loss)
"""
    env = {**os.environ, "TEENYGRAD_JIT": "0", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ")


def imported(module: str) -> set[str]:
    """Every module a teenygrad module imports, anywhere in it (a lazy import inside a function too)."""
    names = set()
    for node in ast.walk(ast.parse((REPO / "teenygrad" / f"{module}.py").read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:  # `from teenygrad import tape_fuse` names it too
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_the_fusion_pass_builds_on_the_tape_and_not_the_other_way():
    """A chain, not a loop: tape_fuse imports tape; tape never imports tape_fuse (a caller fuses: fuse(compile(...)))."""
    assert "teenygrad.tape" in imported("tape_fuse")
    assert not {m for m in imported("tape") if m.endswith("tape_fuse")}
