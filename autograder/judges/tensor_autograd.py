"""Judge for assignment 06-tensor-autograd: the engine and the rules of whole op families
(exercises/06-tensor-autograd.ipynb).

Seven parts, each a piece of teenygrad installed by the notebook's test cell; the hidden tests run teenygrad with
it on the grader's inputs and report what comes out; this judge recomputes everything with numpy in float64.

  backward           (x, req, op, a, b, retain, w)     a random graph (below) built with teenygrad's ops, run by
                     the learner's engine with the grader's own rules of add, mul and tanh (the exercise's rules
                     are not needed); reported: the topological order as node numbers, the leaves' .grad after one
                     and after two backward passes, the retained gradients, how often each node's rule ran, and
                     flags (below). One case is a chain of 30,000 ops.
  unbroadcast        (g, shape, noncontiguous)         tg.unbroadcast(g, shape)            -> (result, is g itself)
  reduction_rules    (code, x, axes, keepdim, w, nc)   the rule of sum / mean / max (code 0 / 1 / 2), called
                     directly on the node of x.op(axes, keepdim) with upstream w; an empty `axes` means every axis
  movement_rules     (code, x0, x1, x2, arg, w, nc)    the rule of reshape(arg) / permute(arg) / expand(arg) /
                     x0[key] (arg: the key, one row per entry, see _key) / cat([x0, x1, x2], arg[0]), codes 0-4
  elementwise_rules  (code, a, b, w, nc)               the rule of sqrt tanh sigmoid relu abs (codes 0-4, b unused),
                     a / b, a ** b, a ** float(b) (only a needs a gradient), a.maximum(b) (codes 5-8)
  matmul_rules       (a, b, w, needs, nc)              the rule of a @ b (batch broadcasting, 1-D operands), leaf i
                     requiring grad when needs[i]; reported per input: its gradient, or 1 when the rule gave
                     None/False for an input that needs none (0 when it gave anything else)
  kernel_launchers   (code, x, aux, axis, w, nc)       the rule of x.softmax(axis) / x.log_softmax(axis) (codes 0,
                     1), of cross_entropy(x, aux) (code 2, w the 0-d upstream), of x.gather(axis, aux) (code 3),
                     and scatter_add(w, x.shape, axis, aux) called directly (code 4, axis negative): dx

The rules are called directly (`teenygrad.ops.RULES[node.op](node, w)` on the node of a one-op forward), so a rule
part is judged without the learner's engine; the test cells install the grader's own `unbroadcast` for them, so a
rule that calls `tg.unbroadcast` is judged without the learner's part 2 either.

The graph of part backward: leaves x[i] (vectors of length n), leaf i requiring grad when req[i]; then node k
(number L + k) is op[k] of pool[a[k]] and pool[b[k]]: 0 add, 1 mul, 2 tanh (of a), 3 pool[a] * pool[b].detach().
The root is pool[-1] (it requires grad), backward(w). The grader's tanh rule returns a float32 gradient (the engine
casts it to the input's float64), its mul rule returns both gradients even when one input needs none.
FLAGS, in order (1 = as the contract says): grad mode off inside every rule; on again after backward; no two .grads
(nor a .grad and the caller's w) share a buffer; a .grad held across the second backward unchanged; every .grad
float64; then the errors raised (ERRORS: each 1 when the right exception came).
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part, compare

# ---- part backward: the engine ---------------------------------------------------------------------------------

# the error scenarios the hidden tests run, in order, and the exception each must raise ("" for none)
ERRORS = [
    ("an int64 root", "TypeError"),
    ("a root that does not require grad", "RuntimeError"),
    ("a root of 3 elements with no grad given", "ValueError"),
    ("a grad of the wrong shape", "ValueError"),
    ("a rule returning a gradient of the wrong shape", "ValueError"),
    ("a rule returning one gradient for two inputs", "ValueError"),
    ("a rule returning a numpy array", "TypeError"),
    ("an op with no rule", "KeyError"),
    ("a saved tensor written in place after the forward pass", "RuntimeError"),
    ("a rule that raises (grad mode must come back on)", "ZeroDivisionError"),
]
FLAGS = ["grad mode was on inside a rule", "grad mode was not on again after backward",
         "two .grads (or a .grad and the caller's grad) share a buffer", "a .grad held by the caller changed in place",
         "a .grad is not float64 (cast each gradient to its input's dtype)"]


def _graph_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (leaves, nodes, n) in enumerate([(3, 6, 4), (4, 12, 3), (2, 1, 5), (5, 25, 2), (3, 40, 1), (6, 18, 3)]):
        x = rng.normal(size=(leaves, n)) * 0.7
        req = (rng.random(leaves) < 0.7).astype(np.int64)
        req[0] = 1
        op = rng.integers(0, 4, size=nodes)
        a = np.array([rng.integers(0, leaves + k) for k in range(nodes)])
        b = np.array([rng.integers(0, leaves + k) for k in range(nodes)])
        a[-1], op[-1] = 0, 0  # the root adds leaf 0 (it requires grad) to a random earlier tensor
        if i % 2:
            a[: nodes // 2] = b[: nodes // 2]  # x * x, x + x: one tensor used twice by the same op
        retain = (rng.random(nodes) < 0.3).astype(np.int64)
        cases.append((x, req, op, a, b, retain, rng.normal(size=n)))
    # leaf 1 reached through a tanh only: its gradient is the grader's float32 one, cast by the engine or not
    cases.append((rng.normal(size=(2, 3)), np.array([1, 1]), np.array([2, 0]), np.array([1, 0]), np.array([1, 2]),
                  np.array([0, 1]), rng.normal(size=3)))
    # a chain of 30,000 ops: (((x0 + x2) * 1) + x2) * 1 ...: far deeper than Python's recursion limit
    k = 30_000
    op = np.where(np.arange(k) % 2 == 0, 0, 1)
    a = np.arange(3, 3 + k) - 1
    a[0] = 0
    b = np.where(op == 0, 2, 1)
    cases.append((np.array([[0.5], [1.0], [-0.25]]), np.array([1, 0, 1]), op, a, b, np.zeros(k, np.int64),
                  np.array([1.5])))
    return cases


def _graph(x, req, op, a, b, retain):
    """Forward in numpy, and the recorded structure: values, requires_grad and whether a node was recorded."""
    values = [row for row in x]
    needs = [bool(r) for r in req]
    recorded = [False] * len(values)
    edges = [[] for _ in values]  # per tensor: the inputs it passes a gradient back to (needs), as tensor numbers
    for o, i, j in zip(op.tolist(), a.tolist(), b.tolist()):
        u, v = values[i], values[j]
        if o == 0:
            out, ins = u + v, [(i, needs[i]), (j, needs[j])]
        elif o == 1:
            out, ins = u * v, [(i, needs[i]), (j, needs[j])]
        elif o == 2:
            out, ins = np.tanh(u), [(i, needs[i])]
        else:
            out, ins = u * v, [(i, needs[i])]  # b detached
        rec = any(n for _, n in ins)
        values.append(out)
        needs.append(rec)
        recorded.append(rec)
        edges.append([t for t, n in ins if n])
    return values, needs, recorded, edges


def _graph_grads(x, req, op, a, b, w):
    """dL/d(tensor) for every tensor reached, by the chain rule in reverse creation order (a topological order)."""
    values, needs, recorded, _ = _graph(x, req, op, a, b, None)
    L = len(x)
    grads = {len(values) - 1: np.asarray(w, dtype=np.float64)}
    for k in range(len(op) - 1, -1, -1):
        t = L + k
        if t not in grads or not recorded[t]:
            continue
        g = grads[t]
        i, j, o = int(a[k]), int(b[k]), int(op[k])
        if o == 0:
            parts = [(i, g), (j, g)]
        elif o == 1:
            parts = [(i, g * values[j]), (j, g * values[i])]
        elif o == 2:
            parts = [(i, (g * (1 - values[t] ** 2)).astype(np.float32).astype(np.float64))]
        else:
            parts = [(i, g * values[j])]
        for s, gs in parts:
            if needs[s]:
                grads[s] = grads[s] + gs if s in grads else gs
    return grads


def _reached(x, req, op, a, b) -> set[int]:
    """The recorded tensors topological_order(root) must list."""
    _, _, recorded, edges = _graph(x, req, op, a, b, None)
    root = len(recorded) - 1
    seen, stack = set(), [root]
    while stack:
        t = stack.pop()
        if t in seen or not recorded[t]:
            continue
        seen.add(t)
        stack.extend(edges[t])
    return seen


def _backward_check(case: Case, outputs: tuple) -> str | None:
    x, req, op, a, b, retain, w = case
    if len(outputs) != 7:
        return f"the hidden tests returned {len(outputs)} values, expected 7"
    order, first, second, retained, calls, flags, errors = (np.asarray(o) for o in outputs)
    _, _, _, edges = _graph(x, req, op, a, b, None)
    want = _reached(x, req, op, a, b)
    got = order.astype(np.int64).tolist()
    if len(got) != len(set(got)) or set(got) != want:
        missing, extra = sorted(want - set(got))[:5], sorted(set(got) - want)[:5]
        return (f"topological_order: {len(got)} tensors listed, {len(want)} expected (each recorded tensor the root "
                f"reaches through inputs that need a gradient, once); missing {missing}, unexpected {extra} "
                f"(-1: a tensor that is not in the graph, e.g. a leaf)")
    place = {t: k for k, t in enumerate(got)}
    for t in got:
        late = [s for s in edges[t] if s in place and place[s] > place[t]]
        if late:
            return f"topological_order: tensor {t} is listed before its input {late[0]}"
    grads = _graph_grads(x, req, op, a, b, w)
    L = len(x)
    n = x.shape[1]
    expect_first = np.array([grads.get(i, np.full(n, np.nan)) if req[i] else np.full(n, np.nan) for i in range(L)])
    for name, got_g, want_g in [("after one backward", first, expect_first),
                                ("after two backward passes (they add up)", second, 2 * expect_first)]:
        if got_g.shape != want_g.shape:
            return f"the leaves' gradients {name}: shape {got_g.shape}, expected {want_g.shape}"
        bad = ~np.isclose(got_g, want_g, rtol=1e-6, atol=1e-9, equal_nan=True)
        if bad.any():
            leaf = int(np.argwhere(bad)[0][0])
            none = np.isnan(want_g[leaf]).all()
            return (f"leaf {leaf}'s .grad {name}: " + ("expected None (no gradient reaches it)" if none else
                    f"largest error {np.nanmax(np.abs(got_g[leaf] - want_g[leaf])):.3g}"
                    if not np.isnan(got_g[leaf]).all() else "it is None, expected a gradient"))
    kept = [L + k for k in range(len(op)) if retain[k]]
    expect_ret = np.array([grads[t] if t in want and t in grads else np.full(n, np.nan) for t in kept]).reshape(-1, n)
    if retained.shape != expect_ret.shape or not np.allclose(retained, expect_ret, rtol=1e-6, atol=1e-9,
                                                             equal_nan=True):
        return "retain_grad: a retained tensor's .grad is not its gradient (None when backward never reaches it)"
    expect_calls = np.array([1 if t in want else 0 for t in range(L, L + len(op))])
    if calls.shape != expect_calls.shape or not np.array_equal(calls, expect_calls):
        k = int(np.argmax(calls != expect_calls)) if calls.shape == expect_calls.shape else 0
        return (f"the rule of tensor {L + k} ran {int(calls[k]) if calls.shape == expect_calls.shape else '?'} times, "
                f"expected {expect_calls[k]} (once for every node backward reaches, after its gradient is complete)")
    for flag, why in zip(flags.tolist(), FLAGS):
        if flag != 1:
            return why
    for got_e, (what, error) in zip(errors.tolist(), ERRORS):
        if got_e != 1:
            return f"{what}: backward must raise {error}"
    return None


# ---- part unbroadcast ----------------------------------------------------------------------------------------------

def unbroadcast_np(g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum g (the gradient of a broadcast result) back to `shape`."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and g.shape[lead + d] != 1)
    return g.sum(axis=axes, keepdims=True).reshape(shape)


def _unbroadcast_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (g_shape, shape) in enumerate([((4, 3), (3,)), ((4, 3), (4, 1)), ((2, 3), ()), ((3, 4), (3, 4)),
                                          ((5, 2, 3), (2, 1)), ((2, 1, 4), (1, 1, 1)), ((3, 1, 2), (1, 2)),
                                          ((2, 3, 4, 5), (3, 1, 5)), ((1, 1), (1,)), ((6,), (1,)), ((2, 0, 3), (3,))]):
        cases.append((rng.normal(size=g_shape), np.array(shape, dtype=np.int64), i % 2))
    return cases


def _unbroadcast(g, shape, noncontiguous):
    shape = tuple(int(s) for s in np.atleast_1d(shape)) if np.size(shape) else ()
    return unbroadcast_np(np.asarray(g), shape), np.int64(np.shape(g) == shape)


def _unbroadcast_check(case: Case, outputs: tuple) -> str | None:
    want = _unbroadcast(*case)
    if len(outputs) != 2:
        return f"returned {len(outputs)} values, expected 2"
    if want[1] and int(outputs[1]) != 1:
        return "when grad already has the shape, unbroadcast must return grad itself (no copy)"
    part = Part(cases=_unbroadcast_cases, rtol=1e-10, atol=1e-12)
    return compare((outputs[0],), (want[0],), part)


# ---- part reduction_rules --------------------------------------------------------------------------------------------

_REDUCTIONS = [  # (x's shape, axes (empty: every axis), keepdim)
    ((5,), (), 0), ((3, 4), (1,), 0), ((3, 4), (0,), 1), ((2, 3, 4), (0, 2), 0), ((2, 3, 4), (), 1),
    ((1, 1), (1,), 0), ((4, 1, 3), (1,), 1), ((2, 3, 4), (1,), 0), ((3, 2, 2, 3), (1, 3), 1), ((4, 6), (0, 1), 0),
]


def _out_shape(shape, axes, keepdim) -> tuple[int, ...]:
    red = set(axes) if len(axes) else set(range(len(shape)))
    return tuple(1 if d in red else n for d, n in enumerate(shape) if keepdim or d not in red)


def _reduction_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for code in range(3):
        for i, (shape, axes, keepdim) in enumerate(_REDUCTIONS):
            levels = 2 if i % 3 else 1000  # max: mostly ties, sometimes (almost) none
            x = rng.integers(0, levels, size=shape).astype(np.float64) - levels / 2 if code == 2 else \
                rng.normal(size=shape)
            cases.append((code, x, np.array(axes, dtype=np.int64), keepdim, rng.normal(size=_out_shape(shape, axes,
                                                                                                     keepdim)), i % 2))
    return cases


def _reduction(code, x, axes, keepdim, w, noncontiguous):
    axes = [int(a) for a in np.atleast_1d(axes)] or list(range(x.ndim))
    kept = [d for d in range(x.ndim) if d not in axes]
    w = np.asarray(w).reshape([1 if d in axes else n for d, n in enumerate(x.shape)])
    if code == 0:
        return np.broadcast_to(w, x.shape).copy()
    if code == 1:
        return np.broadcast_to(w, x.shape) / np.prod([x.shape[d] for d in axes])
    groups = np.transpose(x, kept + axes).reshape(*(x.shape[d] for d in kept), -1)
    first = np.argmax(groups, axis=-1)  # numpy's argmax: the first maximum
    dx = np.zeros(groups.shape)
    np.put_along_axis(dx, first[..., None], w.reshape(first.shape)[..., None], axis=-1)
    dx = dx.reshape(*(x.shape[d] for d in kept), *(x.shape[d] for d in axes))
    return np.transpose(dx, np.argsort(kept + axes))


# ---- part movement_rules ---------------------------------------------------------------------------------------------

NONE_INDEX = -(10**9)  # a slice bound left out (None)


def _key(arg: np.ndarray) -> tuple:
    """A basic indexing key from its rows: (0, start, stop, step) a slice (NONE_INDEX for a bound left out),
    (1, i, 0, 0) an int, (2, 0, 0, 0) None (a new axis)."""
    key = []
    for kind, p, q, r in np.asarray(arg).reshape(-1, 4).tolist():
        if kind == 0:
            key.append(slice(*(None if v == NONE_INDEX else v for v in (p, q, r))))
        else:
            key.append(p if kind == 1 else None)
    return tuple(key)


_N = NONE_INDEX
_MOVES = [  # (code, x0's shape, arg)
    (0, (3, 4), (2, 6)), (0, (2, 3, 2), (12,)), (0, (5,), (1, 5, 1)), (0, (4, 1), (4,)),
    (1, (3, 4), (1, 0)), (1, (2, 3, 4), (2, 0, 1)), (1, (2, 3, 4, 5), (3, 1, 0, 2)), (1, (4,), (0,)),
    (2, (3, 1), (3, 4)), (2, (4,), (2, 3, 4)), (2, (1, 1), (5, 2)), (2, (2, 1, 3), (4, 2, 5, 3)),
    (3, (3, 4), [(0, 1, _N, 1), (0, _N, _N, 2)]), (3, (5, 4), [(0, _N, _N, -1), (1, 2, 0, 0)]),
    (3, (2, 3, 4), [(1, -1, 0, 0), (2, 0, 0, 0), (0, 2, 0, -1)]), (3, (6,), [(0, 1, 5, 3)]),
    (3, (3, 4), [(0, 1, 1, 1)]),
    (4, [(2, 3), (4, 3), (1, 3)], (0,)), (4, [(2, 1, 4), (2, 3, 4), (2, 2, 4)], (1,)), (4, [(3,), (0,), (2,)], (-1,)),
    (4, [(2, 3, 1), (2, 3, 2), (2, 3, 1)], (2,)), (4, [(2, 2, 3), (2, 2, 3), (2, 2, 3)], (-3,)),
]


def _move_forward_np(code, x0, x1, x2, arg):
    if code == 0:
        return x0.reshape(tuple(arg))
    if code == 1:
        return np.transpose(x0, tuple(arg))
    if code == 2:
        return np.broadcast_to(x0, tuple(arg))
    if code == 3:
        return x0[_key(arg)]
    return np.concatenate([x0, x1, x2], axis=int(arg[0]))


def _movement_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (code, shape, arg) in enumerate(_MOVES):
        shapes = shape if code == 4 else [shape, (0,), (0,)]
        x0, x1, x2 = (rng.normal(size=s) for s in shapes)
        arg = np.array(arg, dtype=np.int64)
        out = _move_forward_np(code, x0, x1, x2, arg)
        cases.append((code, x0, x1, x2, arg, rng.normal(size=out.shape), i % 2))
    return cases


def _movement(code, x0, x1, x2, arg, w, noncontiguous):
    w = np.asarray(w)
    if code == 0:
        return w.reshape(x0.shape)
    if code == 1:
        return np.transpose(w, np.argsort(arg))
    if code == 2:
        return unbroadcast_np(w, x0.shape)
    if code == 3:
        dx = np.zeros(x0.shape)
        dx[_key(arg)] = w
        return dx
    axis = int(arg[0])
    sizes = [x.shape[axis] for x in (x0, x1, x2)]
    return tuple(np.split(w, np.cumsum(sizes)[:-1], axis=axis))


# ---- part elementwise_rules ------------------------------------------------------------------------------------------

UNARY = ["sqrt", "tanh", "sigmoid", "relu", "abs"]
_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5,), ()), ((1,), (2, 3)), ((4, 1), (1, 5))]


def _elementwise_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for code in range(5):
        for i, shape in enumerate([(3, 4), (2, 3, 2), (7,), ()]):
            a = rng.uniform(0.2, 3.0, size=shape) if code == 0 else rng.normal(size=shape) * 2
            if code in (3, 4) and a.size > 1:
                a.flat[::3] = 0.0  # the kinks: the gradient is 0 at x = 0
            cases.append((code, a, np.zeros(0), rng.normal(size=shape), i % 2))
    for code in (5, 6, 8):
        for i, (sa, sb) in enumerate(_PAIRS):
            if code == 5:
                a, b = rng.normal(size=sa), rng.uniform(0.5, 2.0, size=sb) * rng.choice([-1, 1], size=sb)
            elif code == 6:
                a, b = rng.uniform(0.3, 2.5, size=sa), rng.uniform(-2.0, 3.0, size=sb)
            else:  # a few integers: many ties
                a, b = rng.integers(-1, 2, size=sa).astype(np.float64), rng.integers(-1, 2, size=sb).astype(np.float64)
            cases.append((code, a, b, rng.normal(size=np.broadcast_shapes(sa, sb)), i % 2))
    for i, p in enumerate([2.0, 3.0, -1.0, 0.5]):  # a constant exponent: negative bases, where ln a is nan
        a = rng.normal(size=(3, 4)) if p.is_integer() else rng.uniform(0.1, 2.0, size=(3, 4))
        cases.append((7, a, np.float64(p), rng.normal(size=(3, 4)), i % 2))
    return cases


def _elementwise(code, a, b, w, noncontiguous):
    w = np.asarray(w)
    if code == 0:
        return w / (2 * np.sqrt(a))
    if code == 1:
        return w * (1 - np.tanh(a) ** 2)
    if code == 2:
        s = 1 / (1 + np.exp(-a))
        return w * s * (1 - s)
    if code == 3:
        return w * (a > 0)
    if code == 4:
        return w * np.sign(a)
    if code == 5:
        return unbroadcast_np(w / b, np.shape(a)), unbroadcast_np(-w * a / b ** 2, np.shape(b))
    if code == 6:
        return unbroadcast_np(w * b * a ** (b - 1), np.shape(a)), unbroadcast_np(w * a ** b * np.log(a), np.shape(b))
    if code == 7:
        return w * b * a ** (b - 1)
    a_wins = (a >= b).astype(np.float64)  # broadcast; a tie goes to a
    return unbroadcast_np(w * a_wins, np.shape(a)), unbroadcast_np(w * (1 - a_wins), np.shape(b))


# ---- part matmul_rules ----------------------------------------------------------------------------------------------

_PRODUCTS = [  # (a's shape, b's shape, needs) of a @ b
    ((3, 4), (4, 5), (1, 1)), ((2, 3, 4), (4, 5), (1, 1)), ((2, 3, 4), (2, 4, 5), (1, 1)),
    ((2, 1, 3, 4), (3, 4, 2), (1, 1)), ((1, 3, 4), (5, 4, 2), (1, 1)), ((5, 4), (2, 4, 3), (1, 1)),
    ((4,), (4, 5), (1, 1)), ((3, 4), (4,), (1, 1)), ((4,), (4,), (1, 1)),
    ((4,), (2, 4, 3), (1, 1)), ((2, 3, 4), (4,), (1, 1)), ((1, 1), (1, 1), (1, 1)),
    ((3, 4), (4, 5), (1, 0)), ((2, 3, 4), (4, 5), (0, 1)), ((2, 3, 4), (1, 4, 2), (0, 1)), ((4,), (2, 4, 3), (0, 1)),
]


def _matmul_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (sa, sb, needs) in enumerate(_PRODUCTS):
        a, b = rng.normal(size=sa), rng.normal(size=sb)
        cases.append((a, b, rng.normal(size=np.matmul(a, b).shape), np.array(needs, dtype=np.int64), i % 2))
    return cases


def _matmul_rules(a, b, w, needs, noncontiguous):
    w = np.asarray(w)  # 1-D operands: a row (1, K), a column (K, 1); their dim put back into w
    a1, b1 = (a[None, :] if a.ndim == 1 else a), (b[:, None] if b.ndim == 1 else b)
    g = w[..., None] if b.ndim == 1 else w
    g = g[..., None, :] if a.ndim == 1 else g
    grads = [unbroadcast_np(g @ np.swapaxes(b1, -1, -2), a1.shape).reshape(a.shape),
             unbroadcast_np(np.swapaxes(a1, -1, -2) @ g, b1.shape).reshape(b.shape)]
    return tuple(gr if n else np.int64(1) for gr, n in zip(grads, np.asarray(needs).tolist()))


def _matmul_check(case: Case, outputs: tuple) -> str | None:
    a, b, w, needs, _ = case
    want = _matmul_rules(*case)
    op = f"a @ b with a {a.shape}, b {b.shape}"
    if len(outputs) != len(want):
        return f"the rule of {op}: {len(outputs)} gradients reported, expected {len(want)}"
    for k, (got, exp, need) in enumerate(zip(outputs, want, np.asarray(needs).tolist())):
        if not need:
            if int(np.asarray(got).reshape(-1)[0]) != 1:
                return f"the rule of {op}: input {k} needs no gradient (ctx.needs[{k}] is false): return False"
            continue
        why = compare((got,), (exp,), Part(cases=None, rtol=1e-7, atol=1e-9))
        if why:
            return f"the rule of {op}, the gradient of input {k}: {why}"
    return None


# ---- part kernel_launchers ------------------------------------------------------------------------------------------

_LAUNCHES = [  # (code, x's shape, axis): 0 softmax, 1 log_softmax, 2 cross_entropy, 3 gather's rule, 4 scatter_add
    (0, (3, 4), 1), (0, (3, 4), 0), (0, (2, 3, 4), 1), (0, (5,), 0), (0, (), 0), (0, (2, 0, 3), 2), (0, (4, 6), 1),
    (1, (3, 4), 1), (1, (4, 3), 0), (1, (2, 3, 4), 0), (1, (1, 1), 1), (1, (4, 6), 1), (1, (), 0),
    (2, (4, 5), 0), (2, (2, 3, 4), 0), (2, (1, 1), 0), (2, (3, 6), 0), (2, (6,), 0),
    (3, (3, 4), 1), (3, (3, 4), 0), (3, (2, 3, 4), 1), (3, (5,), 0), (3, (2, 3, 2), 2),
    (4, (3, 4), -1), (4, (4, 2, 3), -2), (4, (6,), -1),
]


def _launch_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for i, (code, shape, axis) in enumerate(_LAUNCHES):
        big = i % 3 == 2  # logits in the thousands: a naive exp overflows, a naive log of 0 is -inf
        x = rng.normal(size=shape) * (1000.0 if big and code < 3 else 2.0)
        aux = np.zeros(0, dtype=np.int64)
        w_shape = shape
        if code == 2:
            rows = shape[:-1]
            aux = rng.integers(0, shape[-1], size=rows)
            w_shape = ()
        elif code >= 3:  # an index with repeats (and, for scatter_add, negative entries), picks along `axis`
            picks = list(shape)
            picks[axis] = shape[axis] + 2
            aux = rng.integers(-shape[axis] if code == 4 else 0, shape[axis], size=picks)
            w_shape = tuple(picks)
        cases.append((code, x, aux, np.int64(axis), rng.normal(size=w_shape), i % 2))
    return cases


def _softmax_np(x, axis):
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


def _launches(code, x, aux, axis, w, noncontiguous):
    w, axis = np.asarray(w), int(axis)
    if x.ndim == 0:  # one row of one element: softmax is 1, log_softmax 0, whatever x is: dx = 0
        return np.zeros(())
    if code == 0:
        y = _softmax_np(x, axis)
        return y * (w - (w * y).sum(axis=axis, keepdims=True))
    if code == 1:
        return w - _softmax_np(x, axis) * w.sum(axis=axis, keepdims=True)
    if code == 2:
        x2, t = x.reshape(-1, x.shape[-1]), np.asarray(aux).reshape(-1)
        dx = _softmax_np(x2, 1)
        dx[np.arange(len(t)), t] -= 1
        return (float(w) * dx / len(t)).reshape(x.shape)
    dx = np.zeros(x.shape)
    axis = axis % x.ndim
    for pos in np.ndindex(aux.shape):
        dst = list(pos)
        dst[axis] = int(aux[pos]) % x.shape[axis]
        dx[tuple(dst)] += w[pos]
    return dx


def _named(reference, names):
    """The reference, and a check that names the op of a failing case."""
    def check(case: Case, outputs: tuple) -> str | None:
        want = reference(*case)
        why = compare(outputs, want if isinstance(want, tuple) else (want,), Part(cases=None, rtol=1e-7, atol=1e-9))
        return why and f"the rule of {names(case)}: {why}"
    return check


PARTS = {
    "backward": Part(cases=_graph_cases, check=_backward_check),
    "unbroadcast": Part(cases=_unbroadcast_cases, check=_unbroadcast_check),
    "reduction_rules": Part(cases=_reduction_cases, check=_named(_reduction, lambda c: ["sum", "mean", "max"][c[0]])),
    "movement_rules": Part(cases=_movement_cases, check=_named(
        _movement, lambda c: ["reshape", "permute", "expand", "index (basic slicing)", "cat"][c[0]])),
    "elementwise_rules": Part(cases=_elementwise_cases, check=_named(
        _elementwise, lambda c: (UNARY + ["div", "pow", "pow (a constant exponent)", "maximum"])[c[0]])),
    "matmul_rules": Part(cases=_matmul_cases, check=_matmul_check),
    "kernel_launchers": Part(cases=_launch_cases, check=_named(_launches, lambda c: (
        ["softmax", "log_softmax", "cross_entropy", "gather", "scatter_add (called directly)"][c[0]]
        + f" on x of shape {c[1].shape}" + (f", axis {int(c[3])}" if c[0] != 2 else "")))),
}
