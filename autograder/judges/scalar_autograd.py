"""Judge for assignment 05-scalar-autograd: chapter 5's backward pass, rules, tape compiler and fusion pass
(exercises/05-scalar-autograd.ipynb). Every case crosses into the learner's process as arrays; the references here
recompute everything in plain Python, never through teenygrad.

A graph is written as arrays: `x`, the leaf values (nodes 0 .. len(x) - 1), then one entry per op node (node
len(x) + k): `op` its opcode (ADD ... RELU below), `a` and `b` the node numbers of its operands (b = -1 for the
one-operand ops) and, where there is one, `k` the exponent of POW. Operands come before the node; the root is
the last node.

  backward     (x, a, b, la, lb) -> (order, grads, grads after a second call): the graph of Values with the given
               local gradients la, lb (no rule runs); order is topological_order(root) as node numbers, grads
               d root / d node for every node after root.backward(), then again after another call (the leaves
               accumulate, the interior nodes start again). One case is a chain of 30,000 nodes.
  rules        (code, u, v) -> (results, local gradients) of the rule `code` on the operand arrays u (and v, or
               the exponent for POW), through Value's operators; scores up to +-1000, magnitudes up to 1e300.
  compile      (x, op, a, b, k, params, inputs, schedule) -> the tape's opcode, a, b, arg, (n_params, n_inputs,
               n_leaves) and the slot of every node; or, for a graph compile must refuse, the error's code
               (1 TypeError, 2 ValueError; 0: no error). params and inputs are leaf numbers (-1: the float 1.5).
  find_chains  (x, op, a, b) -> (root, d root / d leaves, slots, dots, products) of the graph's tape (built from the
               arrays, every leaf a parameter) after the fusion pass: its slots, DOT nodes and DOT products are
               counted here from the graph's structure
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judges import Case, Part, compare

# the opcodes of a case (the hidden tests use the same numbering)
ADD, SUB, MUL, TANH, DIV, MAX, SIGMOID, POW, NEG, EXP, LOG, RELU = range(12)
UNARY = (TANH, SIGMOID, POW, NEG, EXP, LOG, RELU)
# each code's opcode on teenygrad's tape (teenygrad.tape.OPCODES: tests/test_ch05_scalar_autograd.py checks them)
TAPE_OPCODE = {ADD: 1, SUB: 2, MUL: 3, DIV: 4, POW: 5, NEG: 6, EXP: 7, LOG: 8, TANH: 9, RELU: 10, SIGMOID: 11, MAX: 12}


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def _value(code: int, u: float, v: float) -> float:
    if code == ADD:
        return u + v
    if code == SUB:
        return u - v
    if code == MUL:
        return u * v
    if code == TANH:
        return math.tanh(u)
    if code == DIV:
        return u / v
    if code == MAX:
        return u if u >= v else v
    return _sigmoid(u)


def forward_backward(x: np.ndarray, op: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    """(root value, d root / d leaf for every leaf), in plain Python: one loop forward over the nodes, one
    loop backward from the root (the nodes are numbered in a topological order already)."""
    n_leaves = len(x)
    data = [float(v) for v in x] + [0.0] * len(op)
    for k, (code, i, j) in enumerate(zip(op.tolist(), a.tolist(), b.tolist())):
        data[n_leaves + k] = _value(code, data[i], data[j] if j >= 0 else 0.0)
    grad = [0.0] * len(data)
    grad[-1] = 1.0
    for k in range(len(op) - 1, -1, -1):
        code, i, j, g, out = int(op[k]), int(a[k]), int(b[k]), grad[n_leaves + k], data[n_leaves + k]
        if code == ADD:
            grad[i] += g
            grad[j] += g
        elif code == SUB:
            grad[i] += g
            grad[j] -= g
        elif code == MUL:
            grad[i] += data[j] * g
            grad[j] += data[i] * g
        elif code == TANH:
            grad[i] += (1.0 - out * out) * g
        elif code == DIV:
            grad[i] += g / data[j]
            grad[j] += -data[i] / (data[j] * data[j]) * g
        elif code == MAX:
            if data[i] >= data[j]:
                grad[i] += g
            else:
                grad[j] += g
        else:
            grad[i] += out * (1.0 - out) * g
    return data[-1], np.array(grad[:n_leaves])


def _graph(rng: np.random.Generator, n_leaves: int, n_ops: int, weights: dict[int, float],
           ties: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A random DAG: each op (drawn with `weights`) reads earlier nodes, favouring recent ones (deep graphs) and
    reusing nodes (diamonds, x op x). A DIV's denominator is a node of size at least 1/2. Every node nothing
    reads is summed into the root at the end, so the root depends on every leaf and every op. With `ties`
    the leaves take a few values only, so that MAX meets equal operands."""
    x = (rng.integers(-2, 3, size=n_leaves) * 0.5) if ties else rng.uniform(-1.5, 1.5, size=n_leaves)
    data = x.tolist()
    codes, p = list(weights), np.array(list(weights.values())) / sum(weights.values())
    ops, a, b = [], [], []

    def pick() -> int:  # an earlier node, recent ones more likely
        n = len(data)
        return int(n - 1 - min(rng.geometric(0.3) - 1, n - 1)) if rng.random() < 0.7 else int(rng.integers(n))

    for _ in range(n_ops):
        code = int(rng.choice(codes, p=p))
        i = pick()
        j = -1 if code in UNARY else (i if rng.random() < 0.15 else pick())
        if code == DIV:
            big = [k for k, v in enumerate(data) if abs(v) >= 0.5]
            if not big:
                continue
            j = int(big[-1 - min(rng.geometric(0.4) - 1, len(big) - 1)])
        value = _value(code, data[i], data[j] if j >= 0 else 0.0)
        if not abs(value) < 1e3:  # keep the numbers moderate: rounding, not overflow, must decide
            continue
        ops.append(code), a.append(i), b.append(j)
        data.append(value)
    used = set(a) | set(b)
    loose = [k for k in range(len(data)) if k not in used]
    while len(loose) > 1:  # sum the loose ends pairwise into one root
        ops.append(ADD), a.append(loose[0]), b.append(loose[1])
        loose = loose[2:] + [len(data)]
        data.append(0.0)
    if len(data) == n_leaves:  # no op at all: the root must be an op
        ops.append(MUL), a.append(0), b.append(0)
    return x, np.array(ops, dtype=np.int64), np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)


def _moderate(result: object, limit: float = 1e6) -> bool:
    arrays = [np.asarray(r, dtype=np.float64) for r in (result if isinstance(result, tuple) else (result,))]
    return all(np.all(np.isfinite(r)) and np.all(np.abs(r) < limit) for r in arrays)


def _graphs(rng: np.random.Generator, sizes, weights, ties: bool = False) -> list[Case]:
    cases = []
    for n, m in sizes:
        while True:
            case = _graph(rng, n, m, weights, ties)
            if _moderate(forward_backward(*case)):
                break
        cases.append(case)
    return cases


# --- backward: the chain rule over graphs whose local gradients are given ----------------------------------------

def _dag(rng: np.random.Generator, n_leaves: int, n_ops: int) -> Case:
    """A random DAG of one- and two-operand nodes with random local gradients: operands favour recent nodes (deep
    graphs) and repeat (x op x: one child twice); every node nothing reads is added into the root at the end."""
    n = n_leaves
    a, b, la, lb = [], [], [], []

    def pick() -> int:
        return int(n - 1 - min(rng.geometric(0.3) - 1, n - 1)) if rng.random() < 0.7 else int(rng.integers(n))

    for _ in range(n_ops):
        i = pick()
        j = -1 if rng.random() < 0.3 else (i if rng.random() < 0.15 else pick())
        a.append(i), b.append(j), la.append(rng.uniform(-1.5, 1.5)), lb.append(rng.uniform(-1.5, 1.5))
        n += 1
    read = set(a) | set(b)
    loose = [k for k in range(n) if k not in read]
    while len(loose) > 1 or n == n_leaves:  # one root (an op), which reads everything through its children
        a.append(loose[0]), b.append(loose[1] if len(loose) > 1 else -1), la.append(1.0), lb.append(1.0)
        loose = loose[2:] + [n]
        n += 1
    lb = [g if j >= 0 else 0.0 for g, j in zip(lb, b)]
    return (rng.uniform(-1, 1, size=n_leaves), np.array(a, dtype=np.int64), np.array(b, dtype=np.int64),
            np.array(la), np.array(lb))


def _deep_chain(rng: np.random.Generator, n: int = 30_000) -> Case:
    """Node k + 1 reads node k, and every tenth also reads leaf 0 (a second path): deeper than any recursion limit."""
    n_leaves = 2
    a = np.arange(1, n + 1, dtype=np.int64)
    a[0] = 1
    b = np.where(np.arange(n) % 10 == 0, 0, -1).astype(np.int64)
    la = rng.uniform(0.999, 1.001, size=n)
    lb = np.where(b >= 0, rng.uniform(-1e-3, 1e-3, size=n), 0.0)
    return rng.uniform(-1, 1, size=n_leaves), a, b, la, lb


def _backward_cases(rng: np.random.Generator) -> list[Case]:
    sizes = [(1, 1), (1, 3), (2, 8), (3, 20), (4, 60), (6, 150)]
    return [_dag(rng, n, m) for n, m in sizes] + [_deep_chain(rng)]


def dfs_order(children: list[tuple[int, ...]], root: int) -> list[int]:
    """The recursive depth-first order (children in order, a node after its children, each once), with a stack."""
    order: list[int] = []
    seen: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(children[node]) if c not in seen)
    return order


def _children(n_leaves: int, a: np.ndarray, b: np.ndarray) -> list[tuple[int, ...]]:
    return [()] * n_leaves + [(int(i),) if j < 0 else (int(i), int(j)) for i, j in zip(a.tolist(), b.tolist())]


def _backward_reference(x, a, b, la, lb):
    n_leaves, n = len(x), len(x) + len(a)
    order = dfs_order(_children(n_leaves, a, b), n - 1)
    grad = np.zeros(n)
    passes = []
    for _ in range(2):
        grad[n_leaves:] = 0.0
        grad[n - 1] = 1.0
        for node in reversed(order):
            if node >= n_leaves:
                k = node - n_leaves
                grad[a[k]] += la[k] * grad[node]
                if b[k] >= 0:
                    grad[b[k]] += lb[k] * grad[node]
        passes.append(grad.copy())
    return np.array(order, dtype=np.int64), passes[0], passes[1]


# --- rules: each op's result and local gradients, at ordinary and extreme operands -------------------------------

def _rule(code: int, u: float, v: float) -> tuple[float, tuple[float, ...]]:
    """The rule in plain Python, in the forms the contracts state (gradients from the result where they say so)."""
    if code == SUB:
        return u - v, (1.0, -1.0)
    if code == DIV:
        return u / v, (1.0 / v, -u / (v * v))
    if code == MAX:
        return (u, (1.0, 0.0)) if u >= v else (v, (0.0, 1.0))
    if code == POW:
        return math.pow(u, v), (v * math.pow(u, v - 1.0),)
    if code == NEG:
        return -u, (-1.0,)
    if code == EXP:
        return math.exp(u), (math.exp(u),)
    if code == LOG:
        return math.log(u), (1.0 / u,)
    if code == TANH:
        t = math.tanh(u)
        return t, (1.0 - t * t,)
    if code == RELU:
        return (u, (1.0,)) if u > 0.0 else (0.0, (0.0,))
    s = _sigmoid(u)
    return s, (s * (1.0 - s),)


RULE_CODES = (SUB, DIV, MAX, POW, NEG, EXP, LOG, TANH, RELU, SIGMOID)


def _rules_cases(rng: np.random.Generator) -> list[Case]:
    def signs(m: np.ndarray) -> np.ndarray:
        return m * rng.choice([-1.0, 1.0], size=m.shape)

    wide = signs(10.0 ** rng.uniform(-3, 3, size=40))
    huge = signs(10.0 ** rng.uniform(-100, 100, size=40))
    scores = np.concatenate([[-1000.0, -745.0, -709.0, -700.0, -40.0, -30.0, -1e-9, 0.0, 1e-9, 30.0, 40.0, 700.0,
                              745.0, 1000.0], rng.normal(size=30) * 300])
    ties = rng.integers(-2, 3, size=40) * 0.5
    cases: list[Case] = [
        (SUB, huge, signs(10.0 ** rng.uniform(-100, 100, size=40))),
        (DIV, huge, signs(10.0 ** rng.uniform(-50, 50, size=40))),
        (MAX, wide, signs(10.0 ** rng.uniform(-3, 3, size=40))),
        (MAX, ties, rng.integers(-2, 3, size=40) * 0.5),  # ties: the gradient goes to the first operand
        (POW, 10.0 ** rng.uniform(-2, 2, size=40), rng.uniform(-3, 3, size=40)),  # positive base, any exponent
        (POW, wide, rng.integers(-3, 5, size=40).astype(float)),  # any base, whole exponents (0 and 1 too)
        (NEG, huge, np.zeros(40)),
        (EXP, np.concatenate([[-745.0, -700.0, 0.0, 700.0, 709.0], rng.uniform(-50, 50, size=30)]), np.zeros(35)),
        (LOG, 10.0 ** rng.uniform(-300, 300, size=40), np.zeros(40)),
        (TANH, scores, np.zeros(len(scores))),
        (RELU, np.concatenate([[0.0, -0.0, 1e-300, -1e-300], wide]), np.zeros(44)),
        (SIGMOID, scores, np.zeros(len(scores))),
    ]
    return [(code, u, v) for code, u, v in cases]


def _rules_reference(code, u, v):
    out = [_rule(code, p, q) for p, q in zip(u.tolist(), v.tolist())]
    return np.array([r for r, _ in out]), np.array([g for _, g in out])


def _rules_check(case: Case, outputs: tuple) -> str | None:
    """Results and local gradients to rounding, *relative* to their size (atol below every normal float64:
    sigmoid(-700) is 1e-304, not "about 0"), except where the contract computes a gradient from a result near 1,
    as 1 - t^2 or s (1 - s): there the result's rounding (1e-16) is all that can be asked."""
    code, u, _ = case
    want = _rules_reference(*case)
    if len(outputs) != 2:
        return f"returned {len(outputs)} values, expected 2"
    got = tuple(np.asarray(o, dtype=np.float64) for o in outputs)
    why = compare(got[:1], want[:1], Part(cases=_rules_cases, rtol=1e-12, atol=1e-300))
    if why or got[1].shape != want[1].shape:
        return why or f"local gradients of shape {got[1].shape}, expected {want[1].shape}"
    slack = 4e-16 if code == TANH else np.where(u >= 0, 4e-16, 1e-300)[:, None] if code == SIGMOID else 1e-300
    err = np.abs(got[1] - want[1])
    bad = ~(err <= 1e-12 * np.abs(want[1]) + slack)
    if bad.any():
        k = int(np.flatnonzero(bad.any(axis=1))[0])
        return f"local gradients at {u[k]:.6g}: {got[1][k].tolist()}, expected {want[1][k].tolist()}"
    return None


# --- compile: graphs with every op, laid out on a tape --------------------------------------------------------

def _op_graph(rng: np.random.Generator, n_leaves: int, n_ops: int) -> tuple[np.ndarray, ...]:
    """A random DAG with every opcode (pow with an exponent), shared nodes and x op x; leaves with equal values
    (nodes are told apart by identity); every node nothing reads added into the root."""
    x = rng.integers(-2, 3, size=n_leaves) * 0.5
    ops, a, b, k = [], [], [], []
    n = n_leaves

    def pick() -> int:
        return int(n - 1 - min(rng.geometric(0.3) - 1, n - 1)) if rng.random() < 0.7 else int(rng.integers(n))

    for _ in range(n_ops):
        code = int(rng.integers(12))
        i = pick()
        j = -1 if code in UNARY else (i if rng.random() < 0.15 else pick())
        ops.append(code), a.append(i), b.append(j), k.append(float(rng.integers(-2, 4)) if code == POW else 0.0)
        n += 1
    read = set(a) | set(b)
    loose = [m for m in range(n) if m not in read]
    while len(loose) > 1 or n == n_leaves:
        ops.append(ADD), a.append(loose[0]), b.append(loose[1] if len(loose) > 1 else loose[0]), k.append(0.0)
        loose = loose[2:] + [n]
        n += 1
    return x, np.array(ops, dtype=np.int64), np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), np.array(k)


def _compile_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n_leaves, n_ops in [(1, 1), (2, 5), (4, 12), (5, 40), (8, 120), (12, 300)]:
        x, op, a, b, k = _op_graph(rng, n_leaves, n_ops)
        leaves = rng.permutation(n_leaves)
        n_params = int(rng.integers(0, n_leaves + 1))
        n_inputs = int(rng.integers(0, n_leaves - n_params + 1))
        params, inputs = leaves[:n_params], leaves[n_params:n_params + n_inputs]
        for schedule in (True, False):
            cases.append((x, op, a, b, k, params, inputs, schedule))
    x, op, a, b, k = _op_graph(rng, 4, 20)
    n = len(x) + len(op)
    refused = [  # a param that is an op; an input twice; a param also an input; a number; a leaf not in the graph
        (x, op, a, b, k, np.array([0, n - 2]), np.array([1]), True),
        (x, op, a, b, k, np.array([0]), np.array([1, 1]), True),
        (x, op, a, b, k, np.array([2]), np.array([2]), False),
        (x, op, a, b, k, np.array([0, -1]), np.array([1]), True),
        (np.append(x, 9.0), op + 0, np.where(a >= 4, a + 1, a), np.where(b >= 4, b + 1, b), k, np.array([0]),
         np.array([4]), True),
        (np.array([2.0]), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
         np.zeros(0), np.array([0]), np.zeros(0, dtype=np.int64), True),  # the root is a leaf
    ]
    return cases + refused


def _compile_reference(x, op, a, b, k, params, inputs, schedule):
    """(opcode, a, b, arg, counts, slot of every node), or the error code compile must raise."""
    n_leaves, n = len(x), len(x) + len(op)
    params, inputs = [int(p) for p in np.atleast_1d(params)], [int(i) for i in np.atleast_1d(inputs)]
    if -1 in params + inputs:
        return 1
    if not len(op):
        return 2
    order = dfs_order(_children(n_leaves, a, b), n - 1)
    listed = params + inputs
    if len(set(listed)) < len(listed) or any(p not in order or p >= n_leaves for p in listed):
        return 2
    constants = [v for v in order if v < n_leaves and v not in listed]
    ops = [v for v in order if v >= n_leaves]
    if schedule:
        depth = [0] * n
        for v in ops:
            depth[v] = 1 + max(depth[c] for c in _children(n_leaves, a, b)[v])
        ops = sorted(ops, key=lambda v: (depth[v], TAPE_OPCODE[int(op[v - n_leaves])]))
    nodes = listed + constants + ops
    slot = np.full(n, -1, dtype=np.int64)
    slot[nodes] = np.arange(n)
    m = len(nodes)
    t_op, t_a, t_b, t_arg = np.zeros(m, np.int64), np.full(m, -1, np.int64), np.full(m, -1, np.int64), np.zeros(m)
    for s, v in enumerate(nodes):
        if v >= n_leaves:
            c = v - n_leaves
            t_op[s], t_a[s], t_arg[s] = TAPE_OPCODE[int(op[c])], slot[a[c]], k[c]
            t_b[s] = slot[b[c]] if b[c] >= 0 else -1
    return t_op, t_a, t_b, t_arg, np.array([len(params), len(inputs), m - len(ops)]), slot


def _compile_check(case: Case, outputs: tuple) -> str | None:
    want = _compile_reference(*case)
    if isinstance(want, int):
        got = int(np.asarray(outputs[0]).reshape(-1)[0]) if len(outputs) == 1 else 0
        names = {0: "no error", 1: "TypeError", 2: "ValueError"}
        return None if got == want else f"compile should raise {names[want]} here; it gave {names.get(got, got)}"
    if len(outputs) == 1:
        return "compile raised an error on a graph it should compile"
    what = ["opcodes", "first operands (a)", "second operands (b)", "args", "(n_params, n_inputs, n_leaves)",
            "slots of the graph's nodes"]
    for name, g, w in zip(what, outputs, want):
        g = np.asarray(g)
        if g.shape != w.shape or not np.array_equal(g.astype(np.float64), w.astype(np.float64)):
            return f"wrong {name}: {g.tolist()[:12]}, expected {w.tolist()[:12]}"
    return None


# --- find_chains: graphs on a tape, fused ------------------------------------------------------------------

def _mlp_graph(rng: np.random.Generator, n_in: int, widths: list[int]) -> Case:
    """Leaves: inputs, then weights and biases. Each neuron's sum is a chain b + w0 x0 + ... (sometimes without
    the bias, so the chain starts with a product; sometimes with a product or a partial sum that something else
    reads too, which must keep its slot), then tanh (not after the last layer). The root sums the squares of the
    extra readers and of the outputs."""
    x: list[float] = rng.uniform(-1, 1, size=n_in).tolist()
    ops: list[int] = []
    a: list[int] = []
    b: list[int] = []
    extra: list[int] = []  # nodes the root reads besides the outputs: they are used twice

    def leaf(v: float) -> int:
        x.append(v)
        return -len(x) - 1  # leaf k is -(k + 2) until the leaves are counted (-1 means no operand)

    def node(code: int, i: int, j: int) -> int:
        ops.append(code), a.append(i), b.append(j)
        return len(ops) - 1 + 10**6  # op numbers, renumbered below

    layer = [-(k + 2) for k in range(n_in)]  # the inputs, leaves 0 .. n_in - 1
    for depth, width in enumerate(widths):
        nxt = []
        for _ in range(width):
            scale = 1 / math.sqrt(len(layer))
            s = leaf(0.1 * rng.normal()) if rng.random() < 0.7 else None
            for xi in layer:
                m = node(MUL if rng.random() < 0.95 else ADD, leaf(rng.uniform(-scale, scale)), xi)
                if rng.random() < 0.05:
                    extra.append(m)
                s = m if s is None else node(ADD if rng.random() < 0.93 else SUB, s, m)
                tap = rng.random()
                if tap < 0.04:  # the partial sum read again, by the root
                    extra.append(s)
                elif tap < 0.1:  # ... or by an ADD that comes before the chain's next step on the tape
                    extra.append(node(ADD, s, leaf(rng.normal())))
            nxt.append(node(TANH, s, -1) if depth < len(widths) - 1 else s)
        layer = nxt
    total = None
    for out in extra + layer:  # the extras first: the tape lists their readers before the chains' next steps
        sq = node(MUL, out, out)
        total = sq if total is None else node(ADD, total, sq)
    n_leaves = len(x)

    def renumber(k: int) -> int:
        return -1 if k == -1 else (k - 10**6 + n_leaves if k >= 10**6 else -k - 2)

    return (np.array(x), np.array(ops, dtype=np.int64), np.array([renumber(k) for k in a], dtype=np.int64),
            np.array([renumber(k) for k in b], dtype=np.int64))


def _chain_cases(rng: np.random.Generator) -> list[Case]:
    cases = [_mlp_graph(rng, n_in, widths) for n_in, widths in [(1, [1]), (3, [2]), (4, [3, 2]), (6, [5, 4, 2])]]
    weights = {MUL: 0.45, ADD: 0.3, SUB: 0.1, TANH: 0.15}
    return cases + _graphs(rng, [(2, 8), (3, 30), (5, 80)], weights)


def fusion_counts(x: np.ndarray, op: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """(slots, DOT nodes, DOT products) of the fused tape, from the graph's structure: a term is a MUL read once,
    a step an ADD with a term operand (b if b is a term, else a), a partial sum fused away a step read once,
    as the prev of a step; every other step ends a chain (a DOT); a chain's head that is a term is one more."""
    n_leaves, n = len(x), len(x) + len(op)
    uses = [0] * n
    users: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # (user, 0 for a / 1 for b)
    for k, (i, j) in enumerate(zip(a.tolist(), b.tolist())):
        uses[i] += 1
        users[i].append((n_leaves + k, 0))
        if j >= 0:
            uses[j] += 1
            users[j].append((n_leaves + k, 1))
    code = [-1] * n_leaves + op.tolist()
    operands = [(-1, -1)] * n_leaves + list(zip(a.tolist(), b.tolist()))
    term = [code[k] == MUL and uses[k] == 1 for k in range(n)]
    prev = [-1] * n
    for k in range(n_leaves, n):
        if code[k] == ADD:
            i, j = operands[k]
            prev[k] = i if term[j] else (j if term[i] else -1)
    step = [p >= 0 for p in prev]
    interior = [step[k] and uses[k] == 1 and prev[users[k][0][0]] == k for k in range(n)]
    dots = products = gone = 0
    for k in range(n):
        if step[k] and not interior[k]:
            dots += 1
            p, terms = k, 1
            while interior[prev[p]]:
                p = prev[p]
                terms += 1
                gone += 1
            if term[prev[p]]:
                terms += 1
            products += terms
            gone += terms
    return n - gone, dots, products


def _chains_reference(x, op, a, b):
    return (*forward_backward(x, op, a, b), *fusion_counts(x, op, a, b))


PARTS = {
    "backward": Part(cases=_backward_cases, reference=_backward_reference, rtol=1e-9, atol=1e-12),
    "rules": Part(cases=_rules_cases, check=_rules_check),
    "compile": Part(cases=_compile_cases, check=_compile_check),
    # numba's and Python's float64 may differ in the last bit, and the tape adds gradients in its own order
    "find_chains": Part(cases=_chain_cases, reference=_chains_reference, rtol=1e-9, atol=1e-12),
}
