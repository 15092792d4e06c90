"""Judge for assignment 05-scalar-autograd: scalar autograd by hand (exercises/05-scalar-autograd.ipynb).

Every case is a random expression graph written as arrays, so it can cross into the learner's process:

    x            the leaf values (leaves are nodes 0 .. len(x) - 1)
    op, a, b     one entry per op node (node len(x) + k): its opcode (ADD, SUB, MUL, TANH below) and the
                 node numbers of its operands (b = -1 for TANH); operands always come before the node

The root is the last node. The hidden tests rebuild the graph out of `teenygrad.value.Value`s (with the
learner's piece swapped in) and report what came out; the references here recompute everything in plain
Python, never through teenygrad, and `check` judges a topological order by its properties, since a graph has
many valid orders.
"""
from __future__ import annotations

import math

import numpy as np

from autograder.judges import Case, Part

ADD, SUB, MUL, TANH = 0, 1, 2, 3  # the opcodes of a case (the hidden tests use the same numbering)


def _graph(rng: np.random.Generator, n_leaves: int, n_ops: int, p_mul: float,
           connect: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A random DAG: each op reads earlier nodes, favouring recent ones (deep graphs) and reusing nodes
    (diamonds, x * x). With `connect`, every node that nothing reads is summed into the root at the end,
    so the root depends on every leaf and every op."""
    x = rng.uniform(-1.5, 1.5, size=n_leaves)
    ops, a, b = [], [], []
    n = n_leaves

    def pick() -> int:  # an earlier node, recent ones more likely
        return int(n - 1 - min(rng.geometric(0.3) - 1, n - 1)) if rng.random() < 0.7 else int(rng.integers(n))

    for _ in range(n_ops):
        r = rng.random()
        rest = (r - p_mul) / (1.0 - p_mul)  # the other ops share what mul leaves: 35% tanh, 35% add, 30% sub
        code = MUL if r < p_mul else (TANH if rest < 0.35 else (ADD if rest < 0.7 else SUB))
        i = pick()
        j = -1 if code == TANH else (i if rng.random() < 0.15 else pick())  # sometimes x op x
        ops.append(code), a.append(i), b.append(j)
        n += 1
    if connect:
        used = set(a) | set(b)
        loose = [k for k in range(n) if k not in used]
        while len(loose) > 1:  # sum the loose ends pairwise into one root
            ops.append(ADD), a.append(loose[0]), b.append(loose[1])
            loose = loose[2:] + [n]
            n += 1
        if n == n_leaves:  # no op at all: the root must be an op
            ops.append(MUL), a.append(0), b.append(0)
    return x, np.array(ops, dtype=np.int64), np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)


def forward_backward(x: np.ndarray, op: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, np.ndarray]:
    """(root value, d root / d leaf for every leaf), in plain Python: one loop forward over the nodes, one
    loop backward from the root (the nodes are numbered in a topological order already)."""
    data = [float(v) for v in x] + [0.0] * len(op)
    n_leaves = len(x)
    for k, (code, i, j) in enumerate(zip(op.tolist(), a.tolist(), b.tolist())):
        u = data[i]
        if code == ADD:
            data[n_leaves + k] = u + data[j]
        elif code == SUB:
            data[n_leaves + k] = u - data[j]
        elif code == MUL:
            data[n_leaves + k] = u * data[j]
        else:
            data[n_leaves + k] = math.tanh(u)
    grad = [0.0] * len(data)
    grad[-1] = 1.0
    for k in range(len(op) - 1, -1, -1):
        code, i, j, g = int(op[k]), int(a[k]), int(b[k]), grad[n_leaves + k]
        if code == ADD:
            grad[i] += g
            grad[j] += g
        elif code == SUB:
            grad[i] += g
            grad[j] -= g
        elif code == MUL:
            grad[i] += data[j] * g
            grad[j] += data[i] * g
        else:
            grad[i] += (1.0 - data[n_leaves + k] ** 2) * g
    return data[-1], np.array(grad[:n_leaves])


# --- mul_op: Values built with the learner's multiplication rule ------------------------------------------

def _mul_cases(rng: np.random.Generator) -> list[Case]:
    sizes = [(1, 1), (2, 3), (3, 8), (4, 20), (6, 40), (10, 80)]  # (leaves, ops) before connecting
    return [_graph(rng, n, m, p_mul=0.5) for n, m in sizes]


def _mul_reference(x, op, a, b):
    return forward_backward(x, op, a, b)


# --- topological_order: judged by its properties ----------------------------------------------------------

def _topo_cases(rng: np.random.Generator) -> list[Case]:
    """(n_leaves, a, b, root): op node n_leaves + k adds a[k] and b[k] (b[k] = -1: tanh of a[k]). The root is
    not always the last node, and some nodes do not feed it: they must not be listed."""
    cases = []
    for n, m in [(1, 1), (2, 4), (3, 10), (5, 30), (8, 60), (4, 300)]:
        _, _, a, b = _graph(rng, n, m, p_mul=0.0, connect=False)
        total = n + len(a)
        root = total - 1 if len(cases) % 2 == 0 else int(rng.integers(max(n, total - 5), total))
        cases.append((n, a, b, root))
    # a chain of 12 diamonds (two tanh of the same node, added): 2^12 paths from the root to the leaf, so a
    # search that does not remember what it has visited lists the leaf thousands of times
    a, b = [], []
    top = 0  # the node the next diamond reads: first the leaf, node 0
    for _ in range(12):
        k = len(a)  # op k is node 1 + k: the two tanh nodes are nodes k + 1 and k + 2, their sum k + 3
        a += [top, top, k + 1]
        b += [-1, -1, k + 2]
        top = k + 3
    cases.append((1, np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), len(a)))
    return cases


def _reachable(a: np.ndarray, b: np.ndarray, n_leaves: int, root: int) -> list[bool]:
    seen = [False] * (n_leaves + len(a))
    seen[root] = True
    for node in range(root, n_leaves - 1, -1):  # operands come before their node: one sweep down suffices
        if seen[node] and node >= n_leaves:
            seen[int(a[node - n_leaves])] = True
            if b[node - n_leaves] >= 0:
                seen[int(b[node - n_leaves])] = True
    return seen


def _topo_check(case: Case, outputs: tuple) -> str | None:
    n_leaves, a, b, root = case
    n_leaves, root = int(n_leaves), int(root)
    if len(outputs) != 1:
        return f"reported {len(outputs)} arrays, expected 1"
    order = np.asarray(outputs[0])
    if order.ndim != 1 or not np.issubdtype(order.dtype, np.integer):
        return "the order was not reported as a list of nodes"
    order = order.tolist()
    total = n_leaves + len(a)
    if any(k < 0 or k >= total for k in order):
        return "the order contains something that is not a node of the graph"
    seen = _reachable(a, b, n_leaves, root)
    position: dict[int, int] = {}
    for p, k in enumerate(order):
        if k in position:
            return f"a node appears twice in the order (positions {position[k]} and {p})"
        position[k] = p
    missing = sum(1 for k in range(total) if seen[k] and k not in position)
    extra = sum(1 for k in position if not seen[k])
    if missing:
        return f"{missing} node(s) the root depends on are missing from the order"
    if extra:
        return f"{extra} node(s) the root does not depend on are in the order"
    for k, p in position.items():
        if k >= n_leaves:
            for child in (int(a[k - n_leaves]), int(b[k - n_leaves])):
                if child >= 0 and position[child] > p:
                    return "a node comes before one of its children"
    if order[-1] != root:
        return "the root is not last"
    return None


# --- tanh_opcode: a tape whose tanh nodes run the learner's forward and backward ------------------------------

def _tanh_cases(rng: np.random.Generator) -> list[Case]:
    sizes = [(1, 2), (2, 5), (3, 12), (5, 30), (8, 60), (4, 120)]
    cases = []
    for n, m in sizes:
        while True:  # at least one tanh, so that the learner's opcode runs, and moderate numbers: the tape
            case = _graph(rng, n, m, p_mul=0.3)  # adds in another order than the reference, and at 1e35 a
            if np.any(case[1] == TANH) and _moderate(_mul_reference(*case)):  # rounding step exceeds rtol
                break
        cases.append(case)
    return cases


def _moderate(result: object, limit: float = 1e6) -> bool:
    arrays = [np.asarray(r, dtype=np.float64) for r in (result if isinstance(result, tuple) else (result,))]
    return all(np.all(np.isfinite(r)) and np.all(np.abs(r) < limit) for r in arrays)


PARTS = {
    # the hidden tests do the same float64 arithmetic in the same order: agreement is to rounding
    "mul_op": Part(cases=_mul_cases, reference=_mul_reference, rtol=1e-9, atol=1e-12),
    "topological_order": Part(cases=_topo_cases, check=_topo_check),
    # numba's tanh and Python's may differ in the last bit
    "tanh_opcode": Part(cases=_tanh_cases, reference=_mul_reference, rtol=1e-9, atol=1e-12),
}
