"""Chapter 5's compiler: a tape runs the same graph as the Values (forward and backward to 1e-12), takes new
inputs without a rebuild, trains, runs under TEENYGRAD_JIT=0, takes a learner's opcode, and fails clearly."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_ch05_value import ALL_OPS, build, leaf_values, programs, sane

from teenygrad import tape as T
from teenygrad.datasets import load_digits
from teenygrad.value import Value
from teenygrad.value_nn import MLP, cross_entropy, sgd_step

REPO = Path(__file__).resolve().parent.parent


def close(got, want, tol=1e-12) -> bool:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return bool(np.all(np.abs(got - want) <= tol * (1 + np.abs(want))))


def compiled(program, xs, schedule=True):
    """Values and a tape of the same random expression; the first leaf is a parameter, the rest inputs."""
    leaves = [Value(x) for x in xs]
    root, pool = build(program, leaves)
    tape = T.compile(root, inputs=leaves[1:], params=leaves[:1], schedule=schedule)
    return leaves, root, pool, tape


@settings(max_examples=150, deadline=None)
@given(programs(ALL_OPS), leaf_values, st.booleans())
def test_tape_matches_values_forward_and_backward(program, xs, schedule):
    leaves, root, pool, tape = compiled(program, xs, schedule)
    assume(sane(pool, 1e6))
    ops = np.arange(tape.n_leaves, len(tape))
    assert np.all(tape.a[ops] < ops) and np.all(tape.b[ops] < ops)  # operands first: one forward sweep works
    assert np.all((tape.a[ops] >= 0) & (tape.opcode[ops] != T.LEAF))
    root.backward()
    tape.data[:] = 0.0  # nothing left over from compile: forward recomputes every op
    tape.data[:tape.n_leaves] = [v.data for v in tape.nodes[:tape.n_leaves]]
    assert close(tape.forward(), root.data)
    tape.backward()
    assert close(tape.grad[:len(leaves)], [v.grad for v in leaves])
    assert close(tape.data, [v.data for v in tape.nodes])  # every slot, not just the loss
    assert close(tape.grad, [v.grad for v in tape.nodes])


@settings(max_examples=100, deadline=None)
@given(programs(ALL_OPS), leaf_values, st.data())
def test_set_inputs_matches_a_fresh_graph(program, xs, data):
    leaves, root, pool, tape = compiled(program, xs)
    new = data.draw(st.lists(st.floats(-1.5, 1.5), min_size=len(xs), max_size=len(xs)))
    fresh_leaves = [Value(x) for x in new]
    fresh, fresh_pool = build(program, fresh_leaves)
    assume(sane(fresh_pool, 1e6))
    fresh.backward()
    tape.param_data[:] = new[:1]
    tape.set_inputs(new[1:])
    assert close(tape.forward(), fresh.data)
    tape.backward()
    assert close(tape.grad[:len(xs)], [v.grad for v in fresh_leaves])


def test_python_interpreter_matches_numba():
    _, root, _, tape = compiled([("mul", 0, 1), ("tanh", 2, 0), ("div", 3, 1), ("max", 4, 0), ("rsqrt", 5, 5),
                                 ("relu", 6, 0), ("sigmoid", 7, 0), ("log", 8, 0), ("exp", 9, 0)], [0.3, -0.8, 1.1])
    loss, grads = tape.forward(), (tape.backward(), tape.grad.copy())[1]  # the run-by-run kernels
    assert tape.forward(python=True) == loss
    tape.backward(python=True)
    assert np.array_equal(tape.grad, grads)
    args = (tape.opcode, tape._ua, tape._ub, tape.arg, tape.data)  # the node-by-node kernels, compiled
    T.forward_kernel(*args, tape.n_leaves, len(tape))
    T.zero_and_seed(tape.grad, 0, tape.root)
    T.backward_kernel(*args, tape.grad, tape.n_leaves, len(tape))
    assert tape.data[-1] == loss and np.array_equal(tape.grad, grads)
    assert len(tape.runs) < len(tape) - tape.n_leaves + 1  # some runs are longer than one node
    assert np.all(np.diff(tape.runs) > 0) and tape.runs[0] == tape.n_leaves and tape.runs[-1] == len(tape)


def test_sgd_step_views_and_sync():
    x, w, c = Value(2.0), Value(0.5), Value(3.0)
    loss = (w * x - c) ** 2
    tape = T.compile(loss, inputs=[x], params=[w])  # c becomes a constant
    assert (tape.n_params, tape.n_inputs, tape.n_leaves) == (1, 1, 3)
    tape.forward()
    tape.backward()
    assert tape.param_grads[0] == 2 * (0.5 * 2 - 3) * 2
    tape.sgd_step(0.1)
    assert tape.param_data[0] == 0.5 - 0.1 * -8.0
    tape.param_data[0] = 0.5  # views: writing them writes the tape
    assert tape.forward() == 4.0
    tape.backward()
    tape.backward(accumulate=True)
    assert tape.param_grads[0] == -16.0  # twice -8
    tape.backward()
    assert tape.param_grads[0] == -8.0  # overwritten
    tape.param_data[0] = 1.5
    assert tape.forward() == 0.0
    tape.sync_values()
    assert (w.data, loss.data) == (1.5, 0.0)
    assert "1 params, 1 inputs, 1 constants, 3 ops" in tape.listing()


def digits_setup(n: int, seed: int = 0):
    X, y = load_digits()
    X, y = X[:n] / 16.0, y[:n]
    model = MLP(64, [16, 10], seed=seed)
    xs = [Value(0.0) for _ in range(64)]
    ts = [Value(0.0) for _ in range(10)]
    logits = model(xs)
    tape = T.compile(cross_entropy(logits, ts), inputs=xs + ts, params=model.parameters())
    tape.logit_slots = tape.slots(logits)
    return X, y, model, tape


def test_tape_training_reproduces_value_training():
    """Same init, same examples, per-example SGD: the tape's losses are the Values' losses."""
    X, y, model, tape = digits_setup(3)
    params = model.parameters()
    value_losses = []
    for x, t in zip(X, y):
        loss = cross_entropy(model(list(x)), int(t))  # rebuilt each example, micrograd-style
        loss.backward()
        sgd_step(params, 0.05)
        value_losses.append(loss.data)
    # the tape holds the parameters' values from compile time: the same init
    tape_losses = []
    for x, t in zip(X, y):
        tape.set_inputs(np.concatenate([x, np.eye(10)[t]]))
        tape_losses.append(tape.forward())
        tape.backward()
        tape.sgd_step(0.05)
    assert close(tape_losses, value_losses, 1e-9)
    assert close(tape.param_data, [p.data for p in params], 1e-9)


def test_fit_is_the_four_calls_in_one_kernel():
    X, y, _, tape = digits_setup(20)
    _, _, _, twin = digits_setup(20)
    rows = np.concatenate([X, np.eye(10)[y]], axis=1)
    losses = []
    for row in rows:
        tape.set_inputs(row)
        losses.append(tape.forward())
        tape.backward()
        tape.sgd_step(0.05)
    assert np.array_equal(twin.fit(rows, 0.05), losses)
    assert np.array_equal(twin.data, tape.data) and np.array_equal(twin.grad, tape.grad)
    with pytest.raises(ValueError, match="expected rows of 74 input values"):
        twin.fit(X, 0.05)


def test_tape_trains_digits():
    X, y, model, tape = digits_setup(600)
    inputs = np.concatenate([X, np.eye(10)[y]], axis=1)
    for _epoch in range(3):
        for row in inputs:
            tape.set_inputs(row)
            tape.forward()
            tape.backward()
            tape.sgd_step(0.05)
    correct = 0
    for row, t in zip(inputs, y):  # training accuracy: after a forward pass, read the logits' slots
        tape.set_inputs(row)
        tape.forward()
        correct += int(np.argmax(tape.data[tape.logit_slots]) == t)
    assert correct / len(y) > 0.9, correct / len(y)
    with pytest.raises(ValueError, match="not on this tape"):
        tape.slots([Value(1.0)])


# --- the exercise seam: one opcode from the learner -----------------------------------------------------------

def mul_forward(i, a, b, arg, data):
    data[i] = data[a[i]] * data[b[i]]


def mul_backward(i, a, b, arg, data, grad):
    grad[a[i]] += data[b[i]] * grad[i]
    grad[b[i]] += data[a[i]] * grad[i]


def tanh_forward(i, a, b, arg, data):
    data[i] = math.tanh(data[a[i]])


def tanh_backward(i, a, b, arg, data, grad):
    grad[a[i]] += (1 - data[i] ** 2) * grad[i]


def run(tape, python=False, overrides=None):
    tape.data[tape.n_leaves:] = 0.0
    loss = tape.forward(python=python, overrides=overrides)
    tape.backward(python=python, overrides=overrides)
    return np.concatenate([[loss], tape.grad])


@pytest.mark.parametrize("python", [False, True])
def test_a_correct_learner_opcode_reproduces_the_interpreter(python):
    X, y, model, tape = digits_setup(1)
    tape.set_inputs(np.concatenate([X[0], np.eye(10)[y[0]]]))
    want = run(tape)
    calls = []

    def counting_forward(*args):
        calls.append(args[0])
        mul_forward(*args)
    assert np.array_equal(run(tape, python, {"mul": (counting_forward, mul_backward)}), want)
    assert len(calls) == int(np.sum(tape.opcode == T.MUL))  # every mul node, and only those
    assert np.array_equal(run(tape, python, {"tanh": (tanh_forward, tanh_backward)}), want)
    assert np.array_equal(run(tape, python, {"mul": (None, mul_backward), "tanh": (tanh_forward, None)}), want)


def test_a_wrong_learner_opcode_does_not():
    X, y, model, tape = digits_setup(1)
    tape.set_inputs(np.concatenate([X[0], np.eye(10)[y[0]]]))
    want = run(tape)

    def forgets_one_operand(i, a, b, arg, data, grad):
        grad[a[i]] += data[b[i]] * grad[i]

    def assigns(i, a, b, arg, data, grad):  # = instead of +=: breaks when a node is reused
        grad[a[i]] = data[b[i]] * grad[i]
        grad[b[i]] = data[a[i]] * grad[i]

    def adds(i, a, b, arg, data):
        data[i] = data[a[i]] + data[b[i]]
    for pair in [(None, forgets_one_operand), (None, assigns), (adds, None)]:
        assert not close(run(tape, False, {"mul": pair}), want, 1e-6)
    assert not close(run(tape, False, {"tanh": (tanh_forward, lambda i, a, b, arg, data, grad: None)}), want, 1e-6)


# --- errors and TEENYGRAD_JIT=0 -----------------------------------------------------------------------------------

def test_clear_errors():
    x, y, stray = Value(1.0), Value(2.0), Value(3.0)
    h = x * y
    loss = h.tanh()
    with pytest.raises(ValueError, match="input 0 .* is not in the graph of the loss"):
        T.compile(loss, inputs=[stray], params=[x])
    with pytest.raises(ValueError, match="param 0 .* is computed by op 'mul'"):
        T.compile(loss, inputs=[x], params=[h])
    with pytest.raises(ValueError, match="input 0 .* is already listed as a param"):
        T.compile(loss, inputs=[x], params=[x])
    with pytest.raises(TypeError, match="input 0 is a float"):
        T.compile(loss, inputs=[1.0])
    with pytest.raises(ValueError, match="nothing to compile"):
        T.compile(x, inputs=[x])
    custom = Value(0.0, (x,), "sqrt", (1.0,))
    with pytest.raises(ValueError, match="op 'sqrt' has no opcode"):
        T.compile(custom)
    tape = T.compile(loss, inputs=[x, y])
    with pytest.raises(ValueError, match="expected 2 values, got shape \\(3,\\)"):
        tape.set_inputs([1.0, 2.0, 3.0])
    with pytest.raises(KeyError, match="no opcode named 'matmul'"):
        tape.forward(overrides={"matmul": (None, None)})
    with pytest.raises(TypeError, match="must be a pair"):
        tape.forward(overrides={"mul": mul_forward})


def test_tape_without_jit_in_a_subprocess():
    script = """
import numpy as np
from teenygrad import tape as T
from teenygrad.kernels import jit as _jit
from teenygrad.value import Value
from teenygrad.value_nn import MLP, cross_entropy
assert not _jit.JIT_ENABLED and not hasattr(T.forward_kernel, "py_func")
model = MLP(3, [4, 3], seed=2)
xs, ts = [Value(0.0) for _ in range(3)], [Value(0.0) for _ in range(3)]
tape = T.compile(cross_entropy(model(xs), ts), inputs=xs + ts, params=model.parameters())
x = [0.5, -1.0, 2.0]
tape.set_inputs(x + [0.0, 1.0, 0.0])
loss = tape.forward(); tape.backward()
fresh = cross_entropy(model(x), 1); fresh.backward()
assert abs(loss - fresh.data) < 1e-12, (loss, fresh.data)
assert np.allclose(tape.param_grads, [p.grad for p in model.parameters()], rtol=1e-12, atol=1e-14)
tape.sgd_step(0.1)
twin = T.compile(cross_entropy(model(xs), ts), inputs=xs + ts, params=model.parameters())
losses = twin.fit(np.array([x + [0.0, 1.0, 0.0]] * 2), 0.1)
assert abs(losses[0] - loss) < 1e-12 and abs(losses[1] - tape.forward()) < 1e-12 and losses[1] < losses[0]
print("ok", loss)
"""
    env = {**os.environ, "TEENYGRAD_JIT": "0", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ")
