"""Judge for assignment 05-scalar-autograd: chapter 5's rules and its fusion pass (exercises/05-scalar-autograd.ipynb).

Every case is a random expression graph written as arrays, so it can cross into the learner's process:

    x            the leaf values (leaves are nodes 0 .. len(x) - 1)
    op, a, b     one entry per op node (node len(x) + k): its opcode (ADD ... SIGMOID below) and the node
                 numbers of its operands (b = -1 for the one-operand ops); operands always come before the node

The root is the last node, and it depends on every node. The hidden tests rebuild the graph out of
`teenygrad.value.Value`s with the learner's piece installed in teenygrad, and report what came out; the
references here recompute everything in plain Python, never through teenygrad.

  sigmoid          (x, op, a, b) -> (root, d root / d leaves)   graphs with sigmoid nodes
                   (z,)          -> (sigmoid(z), sigmoid'(z))   elementwise, for scores up to +-1000
  div_and_maximum  (x, op, a, b) -> (root, d root / d leaves)   graphs with div and max nodes, and ties
  find_chains      (x, op, a, b) -> (root, d root / d leaves, slots, dots, products) of the graph compiled to a
                   fused tape (every leaf a parameter): the slots, DOT nodes and DOT products the fusion pass
                   must leave, counted here from the graph's structure
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judges import Case, Part, compare

ADD, SUB, MUL, TANH, DIV, MAX, SIGMOID = range(7)  # the opcodes of a case (the hidden tests use the same numbering)
UNARY = (TANH, SIGMOID)


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


# --- sigmoid: graphs with sigmoid nodes, and the rule at extreme scores -------------------------------------------

_EXTREMES = np.array([-1000.0, -745.0, -700.0, -100.0, -30.0, -1.0, -1e-9, 0.0, 1e-9, 1.0, 30.0, 100.0, 700.0,
                      745.0, 1000.0])


def _sigmoid_cases(rng: np.random.Generator) -> list[Case]:
    weights = {SIGMOID: 0.35, ADD: 0.2, SUB: 0.15, MUL: 0.3}
    cases = _graphs(rng, [(1, 2), (2, 6), (3, 15), (5, 40), (6, 90)], weights)
    return cases + [(_EXTREMES.copy(),), (rng.normal(size=20) * 300,)]


def _sigmoid_reference(*case):
    if len(case) == 1:
        s = np.array([_sigmoid(z) for z in case[0].tolist()])
        return s, s * (1.0 - s)
    return forward_backward(*case)


def _sigmoid_check(case: Case, outputs: tuple) -> str | None:
    """Graphs to rounding; the rule at extreme scores to *relative* accuracy (atol below every normal float64):
    sigmoid(-700) is 1e-304, not "about 0"."""
    want = _sigmoid_reference(*case)
    part = Part(cases=_sigmoid_cases, rtol=1e-9, atol=1e-300 if len(case) == 1 else 1e-12)
    return compare(tuple(np.asarray(o) for o in outputs), want, part)


# --- div and maximum ------------------------------------------------------------------------------------------------

def _div_max_cases(rng: np.random.Generator) -> list[Case]:
    weights = {DIV: 0.25, MAX: 0.3, ADD: 0.15, SUB: 0.1, MUL: 0.1, TANH: 0.1}
    sizes = [(1, 2), (2, 6), (3, 15), (5, 40), (6, 90)]
    return _graphs(rng, sizes, weights) + _graphs(rng, [(8, 30), (6, 60)], weights, ties=True)


# --- find_chains: graphs compiled to a fused tape ------------------------------------------------------------------

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
    # numba's and Python's float64 may differ in the last bit, and the tape adds gradients in its own order
    "sigmoid": Part(cases=_sigmoid_cases, check=_sigmoid_check),
    "div_and_maximum": Part(cases=_div_max_cases, reference=forward_backward, rtol=1e-9, atol=1e-12),
    "find_chains": Part(cases=_chain_cases, reference=_chains_reference, rtol=1e-9, atol=1e-12),
}
