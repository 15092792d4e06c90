"""Chapter 5, second half: compiling a Value graph into a tape.

Building a Value graph costs a Python object per number, and a training loop rebuilds it for every
example even though its *shape* never changes: only the inputs differ. So sort the graph once, and write
it down as a TAPE: one slot per node, in flat numpy arrays,

    opcode[i]   what node i computes (LEAF, ADD, MUL, ...: the module constants below)
    a[i], b[i]  the slots of its operands (-1 when absent)
    arg[i]      a constant that is not a node (the exponent of POW)
    data[i]     its value            grad[i]  d loss / d (node i)

with slots laid out as  [parameters | inputs | constants | ops in topological order]  and the loss last
(`compile` picks the topological order that sorts ops by depth: see its docstring for why).
Every operand comes before its node, so one loop forward computes everything, and one loop backward
(from the loss down) applies the chain rule, just as `Value.backward` does. Those two loops are tiny
interpreters, `forward_kernel` and `backward_kernel`, compiled by numba (`teenygrad.kernels.kernel`): no
Python object is touched per node. (`forward_runs`/`backward_runs` run the same loops faster, testing the
opcode once per run of equal opcodes rather than once per node.) Parameters and inputs are contiguous slots,
so feeding an example is one array copy and an SGD step is one loop over the parameter slots.

    tape = compile(loss, inputs=xs + ts, params=model.parameters())
    for x, t in data:
        tape.set_inputs(np.concatenate([x, t]))
        tape.forward()      # -> the loss, a float
        tape.backward()     # grads of everything; tape.param_grads is a view of the parameters' grads
        tape.sgd_step(lr)   # data[p] -= lr * grad[p] over the parameter slots
    losses = tape.fit(rows, lr)  # the same loop over many examples in one kernel call

Constants (leaves that are neither inputs nor parameters, such as the 1 in `x + 1`) keep the value
they had when compiled. Anything data-dependent must therefore be a node (see `value_nn.cross_entropy`).

Seam for the exercise ("one opcode of the tape interpreter"): `forward`/`backward` take
`overrides={"mul": (my_forward, my_backward)}` (either may be None). Nodes with an overridden opcode run
the learner's functions, which are the body of that opcode's branch of the interpreter loop:

    def my_forward(i, a, b, arg, data):        data[i] = data[a[i]] * data[b[i]]
    def my_backward(i, a, b, arg, data, grad): grad[a[i]] += data[b[i]] * grad[i]; grad[b[i]] += ...

Every other node still runs in the compiled interpreter (in runs between the overridden nodes).
`python=True` runs the interpreter itself as plain Python (for print() and pdb inside the loop).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.jit import kernel
from teenygrad.value import Value, topological_order

# --- opcodes --------------------------------------------------------------------------------------------------
LEAF, ADD, SUB, MUL, DIV, POW, NEG, EXP, LOG, TANH, RELU, SIGMOID, MAX = range(13)
# Value op name -> opcode (a Value leaf has op "")
OPCODES: dict[str, int] = {"": LEAF, "add": ADD, "sub": SUB, "mul": MUL, "div": DIV, "pow": POW, "neg": NEG,
                           "exp": EXP, "log": LOG, "tanh": TANH, "relu": RELU, "sigmoid": SIGMOID, "max": MAX}
OP_NAMES: dict[int, str] = {code: name or "leaf" for name, code in OPCODES.items()}

ForwardFn = Callable[[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]
BackwardFn = Callable[[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


# --- the interpreter: one branch per opcode, forward and backward in the same order ----------------------------

@kernel
def forward_kernel(opcode, a, b, arg, data, lo, hi):
    """data[i] = op(data[a[i]], data[b[i]]) for the nodes lo <= i < hi, in order."""
    for i in range(lo, hi):
        op = opcode[i]
        x = data[a[i]]
        if op == MUL:  # the commonest ops first: fewer comparisons per node
            data[i] = x * data[b[i]]
        elif op == ADD:
            data[i] = x + data[b[i]]
        elif op == SUB:
            data[i] = x - data[b[i]]
        elif op == DIV:
            data[i] = x / data[b[i]]
        elif op == TANH:
            data[i] = math.tanh(x)
        elif op == RELU:
            data[i] = x if x > 0.0 else 0.0
        elif op == EXP:
            data[i] = math.exp(x)
        elif op == LOG:
            data[i] = math.log(x)
        elif op == MAX:
            y = data[b[i]]
            data[i] = x if x >= y else y
        elif op == NEG:
            data[i] = -x
        elif op == POW:
            data[i] = x ** arg[i]
        elif op == SIGMOID:  # two forms, so exp never overflows
            if x >= 0.0:
                data[i] = 1.0 / (1.0 + math.exp(-x))
            else:
                e = math.exp(x)
                data[i] = e / (1.0 + e)
        # LEAF: nothing to compute


@kernel
def backward_kernel(opcode, a, b, arg, data, grad, lo, hi):
    """For the nodes hi > i >= lo, last first: grad[child] += d node / d child * grad[node] (the chain rule)."""
    for i in range(hi - 1, lo - 1, -1):
        op = opcode[i]
        g = grad[i]
        j = a[i]
        k = b[i]
        if op == MUL:  # d(xy)/dx = y, d(xy)/dy = x
            grad[j] += data[k] * g
            grad[k] += data[j] * g
        elif op == ADD:  # 1, 1
            grad[j] += g
            grad[k] += g
        elif op == SUB:  # 1, -1
            grad[j] += g
            grad[k] -= g
        elif op == DIV:  # 1/y, -x/y^2
            y = data[k]
            grad[j] += (1.0 / y) * g
            grad[k] += (-data[j] / (y * y)) * g
        elif op == TANH:  # 1 - tanh^2, from the node's own value
            grad[j] += (1.0 - data[i] * data[i]) * g
        elif op == RELU:  # 1 where x > 0
            if data[j] > 0.0:
                grad[j] += g
        elif op == EXP:  # exp itself
            grad[j] += data[i] * g
        elif op == LOG:  # 1/x
            grad[j] += (1.0 / data[j]) * g
        elif op == MAX:  # to the larger operand (the first on a tie)
            if data[j] >= data[k]:
                grad[j] += g
            else:
                grad[k] += g
        elif op == NEG:  # -1
            grad[j] -= g
        elif op == POW:  # k x^(k-1)
            grad[j] += (arg[i] * data[j] ** (arg[i] - 1.0)) * g
        elif op == SIGMOID:  # s (1 - s)
            grad[j] += (data[i] * (1.0 - data[i])) * g


@kernel
def zero_and_seed(grad, lo, root):
    """grad[lo:] = 0, then d loss / d loss = 1."""
    grad[lo:] = 0.0  # a slice fill, which numba turns into a memset
    grad[root] = 1.0


@kernel
def sgd_kernel(data, grad, lo, hi, lr):
    """One SGD step over the parameter slots: data[p] -= lr * grad[p]."""
    d, g = data[lo:hi], grad[lo:hi]  # slices: their indices start at 0, so numba can vectorise the loop
    for p in range(d.shape[0]):
        d[p] -= lr * g[p]


# The same interpreter, faster: `compile` sorts the ops by depth and then opcode, so the tape is a few long
# runs of one opcode (the dense layers: 1024 MULs in a row, then ADDs). These kernels test the opcode once
# per run; inside a run the loop body has no branch, so the CPU overlaps consecutive (independent) nodes.
# MUL and ADD, nearly all the nodes of an MLP, get their own loops; rarer runs use the node-by-node loop.

@kernel
def forward_runs(opcode, a, b, arg, data, runs):
    """forward_kernel over the runs runs[s] <= i < runs[s + 1]."""
    for s in range(runs.shape[0] - 1):
        lo, hi = runs[s], runs[s + 1]
        op = opcode[lo]
        if op == MUL:
            for i in range(lo, hi):
                data[i] = data[a[i]] * data[b[i]]
        elif op == ADD:
            for i in range(lo, hi):
                data[i] = data[a[i]] + data[b[i]]
        else:
            forward_kernel(opcode, a, b, arg, data, lo, hi)


@kernel
def backward_runs(opcode, a, b, arg, data, grad, runs):
    """backward_kernel over the runs, last run first, last node first."""
    for s in range(runs.shape[0] - 2, -1, -1):
        lo, hi = runs[s], runs[s + 1]
        op = opcode[lo]
        if op == MUL:
            for i in range(hi - 1, lo - 1, -1):
                grad[a[i]] += data[b[i]] * grad[i]
                grad[b[i]] += data[a[i]] * grad[i]
        elif op == ADD:
            for i in range(hi - 1, lo - 1, -1):
                grad[a[i]] += grad[i]
                grad[b[i]] += grad[i]
        else:
            backward_kernel(opcode, a, b, arg, data, grad, lo, hi)


@kernel
def fit_kernel(opcode, a, b, arg, data, grad, runs, rows, n_params, lr, losses):
    """Per-example SGD over `rows` (each row: values for the input slots), all in one compiled call.
    losses[r] is the loss on row r before its step."""
    n = opcode.shape[0]
    for r in range(rows.shape[0]):
        for k in range(rows.shape[1]):  # set_inputs
            data[n_params + k] = rows[r, k]
        forward_runs(opcode, a, b, arg, data, runs)
        losses[r] = data[n - 1]
        zero_and_seed(grad, 0, n - 1)
        backward_runs(opcode, a, b, arg, data, grad, runs)
        sgd_kernel(data, grad, 0, n_params, lr)


def py_func(fn: Callable) -> Callable:
    """The plain-Python function behind a numba kernel, numba's `py_func` (the function itself when TEENYGRAD_JIT=0):
    what `python=True` runs, here and in teenygrad.tape_fuse."""
    return getattr(fn, "py_func", fn)


# --- the tape ---------------------------------------------------------------------------------------------------

class Tape:
    """A Value graph compiled to flat arrays; build one with `compile`."""

    def __init__(self, nodes: list[Value], opcode: np.ndarray, a: np.ndarray, b: np.ndarray, arg: np.ndarray,
                 n_params: int, n_inputs: int, n_leaves: int):
        self.nodes = nodes  # the Value of each slot (for sync_values and listings)
        self.opcode, self.a, self.b, self.arg = opcode, a, b, arg
        # The kernels get the operand slots as uint32 (the same bytes; -1 reads as 2^32-1 but is never used):
        # numba checks every *signed* index for being negative (numpy's a[-1]), an extra compare and add per
        # access, and these loops do little else; an unsigned index cannot be negative, so the check goes away.
        self._ua, self._ub = a.view(np.uint32), b.view(np.uint32)
        self.data = np.array([v.data for v in nodes], dtype=np.float64)
        self.grad = np.zeros(len(nodes), dtype=np.float64)
        self.n_params, self.n_inputs, self.n_leaves = n_params, n_inputs, n_leaves
        self.root = len(nodes) - 1
        # where each run of equal opcodes starts, then the end: what forward_runs and backward_runs loop over
        changes = np.flatnonzero(opcode[n_leaves + 1:] != opcode[n_leaves:-1]) + n_leaves + 1
        self.runs = np.concatenate([[n_leaves], changes, [len(nodes)]]).astype(np.int64)

    def __len__(self) -> int:
        return len(self.nodes)

    def __repr__(self) -> str:
        return (f"Tape({self.n_params} params, {self.n_inputs} inputs, "
                f"{self.n_leaves - self.n_params - self.n_inputs} constants, {len(self) - self.n_leaves} ops)")

    # views into the slots: writing them writes the tape
    @property
    def param_data(self) -> np.ndarray:
        return self.data[:self.n_params]

    @property
    def param_grads(self) -> np.ndarray:
        return self.grad[:self.n_params]

    @property
    def input_data(self) -> np.ndarray:
        return self.data[self.n_params:self.n_params + self.n_inputs]

    @property
    def loss(self) -> float:
        return float(self.data[self.root])

    def slots(self, values: Sequence[Value]) -> np.ndarray:
        """The slot of each Value (e.g. the logits, to read predictions as `tape.data[tape.slots(logits)]`)."""
        where = {id(v): i for i, v in enumerate(self.nodes)}
        try:
            return np.array([where[id(v)] for v in values], dtype=np.int64)
        except KeyError:
            raise ValueError("a Value passed to slots() is not on this tape") from None

    def set_inputs(self, x: Sequence[float] | np.ndarray) -> None:
        """Feed new values to the input slots, in the order `compile` was given the inputs."""
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.n_inputs,):
            raise ValueError(f"set_inputs: expected {self.n_inputs} values, got shape {x.shape}")
        self.input_data[:] = x

    def forward(self, python: bool = False,
                overrides: dict[str, tuple[ForwardFn | None, BackwardFn | None]] | None = None) -> float:
        """Recompute every op slot from the leaves; return the loss."""
        args = (self.opcode, self._ua, self._ub, self.arg, self.data)
        if not (python or overrides):
            forward_runs(*args, self.runs)
            return self.loss
        run = py_func(forward_kernel) if python else forward_kernel
        lo = self.n_leaves
        for i, fn in self._overridden(overrides, 0):  # the learner's nodes, in order
            run(*args, lo, i)  # the nodes before this one
            fn(i, self.a, self.b, self.arg, self.data)
            lo = i + 1
        run(*args, lo, len(self))
        return self.loss

    def backward(self, python: bool = False,
                 overrides: dict[str, tuple[ForwardFn | None, BackwardFn | None]] | None = None,
                 accumulate: bool = False) -> None:
        """d loss / d slot for every slot. Parameter grads are overwritten, or added to if `accumulate`."""
        zero_and_seed(self.grad, self.n_params if accumulate else 0, self.root)
        args = (self.opcode, self._ua, self._ub, self.arg, self.data, self.grad)
        if not (python or overrides):
            backward_runs(*args, self.runs)
            return
        run = py_func(backward_kernel) if python else backward_kernel
        hi = len(self)
        for i, fn in reversed(self._overridden(overrides, 1)):  # last first
            run(*args, i + 1, hi)  # the nodes after this one
            fn(i, self.a, self.b, self.arg, self.data, self.grad)
            hi = i
        run(*args, self.n_leaves, hi)

    def _overridden(self, overrides: dict | None, which: int) -> list[tuple[int, Callable]]:
        """(slot, function) for every node whose opcode has an override (which=0 forward, 1 backward)."""
        if not overrides:
            return []
        fns = {}
        for name, pair in overrides.items():
            if name not in OPCODES or name == "":
                raise KeyError(f"no opcode named {name!r}; opcodes are {', '.join(n for n in OPCODES if n)}")
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise TypeError(f"overrides[{name!r}] must be a pair (forward, backward); either may be None")
            if pair[which] is not None:
                fns[OPCODES[name]] = pair[which]
        slots = np.flatnonzero(np.isin(self.opcode, list(fns)))
        return [(int(i), fns[int(self.opcode[i])]) for i in slots]

    def sgd_step(self, lr: float) -> None:
        """data[p] -= lr * grad[p] for every parameter slot (one compiled loop)."""
        sgd_kernel(self.data, self.grad, 0, self.n_params, lr)

    def fit(self, rows: np.ndarray, lr: float) -> np.ndarray:
        """set_inputs, forward, backward, sgd_step for each row in turn, in one kernel call (no Python per
        example); returns the loss on each row before its step. The same numbers as the four calls."""
        rows = self._rows(rows)
        losses = np.empty(rows.shape[0], dtype=np.float64)
        fit_kernel(self.opcode, self._ua, self._ub, self.arg, self.data, self.grad, self.runs, rows,
                   self.n_params, lr, losses)
        return losses

    def _rows(self, rows: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != self.n_inputs:
            raise ValueError(f"fit: expected rows of {self.n_inputs} input values, got shape {rows.shape}")
        return rows

    def sync_values(self) -> None:
        """Copy every slot's data and grad back into its Value (to inspect, or to go on with Values)."""
        for v, d, g in zip(self.nodes, self.data.tolist(), self.grad.tolist()):
            v.data, v.grad = d, g

    def listing(self, limit: int = 20) -> str:
        """The tape as a program, one slot per line (the first `limit` ops)."""
        lines = [repr(self)]
        for i in range(self.n_leaves, min(len(self), self.n_leaves + limit)):
            op, operands = self._instruction(i)
            lines.append(f"{i:6d} = {op:<7} {operands:<14} # {self.data[i]:.6g}")
        return "\n".join(lines)

    def _instruction(self, i: int) -> tuple[str, str]:
        """(opcode name, operands) of op slot i, as listing() prints them."""
        op, a, b = OP_NAMES[int(self.opcode[i])], int(self.a[i]), int(self.b[i])
        return op, f"{a}" + (f", {b}" if b >= 0 else f", {self.arg[i]:g}" if op == "pow" else "")


@exercise("05-scalar-autograd", "compile")
def compile(root: Value, inputs: Sequence[Value] = (), params: Sequence[Value] = (), schedule: bool = True) -> Tape:
    """Compile the graph of `root` into a Tape: `Tape(nodes, opcode, a, b, arg, len(params), len(inputs), n_leaves)`.

    `inputs` are the leaves `set_inputs` feeds (in that order), `params` the leaves `sgd_step` updates; every
    other leaf of the graph is a constant. `nodes`, one Value per slot, is laid out as

        params (in order) | inputs (in order) | constants | ops (every node with children); the root is last

    with the constants and the ops in the order `topological_order(root)` lists them, n_leaves the number of
    leaf slots. Op slot i gets opcode[i] = OPCODES[v.op], a[i] and b[i] the slots of its first and second child
    (-1 when absent) and arg[i] = v.arg (the exponent of "pow"; 0.0 when None); leaf slots get LEAF, -1, -1 and
    0.0. dtypes: opcode int8, a and b int32, arg float64.

    `schedule` (the default) sorts the ops by depth, stably: a leaf has depth 0, an op 1 + its deepest child's,
    and the ops go by (depth, opcode), keeping topological_order's order among equals. Still children first
    (a child is shallower than its parent), and faster: in topological order a neuron's sum is a chain, each
    add waiting for the previous one; sorted by depth, neighbouring slots are independent (all the products,
    then the first add of every neuron, ...), so the CPU overlaps them, and by opcode, the tape is a few long
    runs of one opcode (what forward_runs loops over). Same graph, same values; only the order in which a
    node's gradient contributions are added can differ (rounding, ~1e-16). False keeps topological_order's.

    Errors: TypeError if an input or param is not a Value; ValueError if it is not in the graph of root, is an
    op (has children), or is listed twice (as inputs, params or both); ValueError if an op has no opcode, or
    if root is a leaf (nothing to compile). To make each chain of multiply-adds one DOT node, fuse the result:
    `teenygrad.tape_fuse.fuse(compile(...))` (that module builds on this one)."""
    order = topological_order(root)
    in_graph = {id(v) for v in order}
    roles: dict[int, str] = {}
    for role, group in (("param", params), ("input", inputs)):
        for k, v in enumerate(group):
            if not isinstance(v, Value):
                raise TypeError(f"{role} {k} is a {type(v).__name__}, not a Value")
            if id(v) not in in_graph:
                raise ValueError(f"{role} {k} ({v!r}) is not in the graph of the loss: the loss does not depend on it")
            if v.children:
                raise ValueError(f"{role} {k} ({v!r}) is computed by op {v.op!r}; inputs and params must be leaves")
            if id(v) in roles:
                raise ValueError(f"{role} {k} ({v!r}) is already listed as a {roles[id(v)]}")
            roles[id(v)] = role
    constants = [v for v in order if not v.children and id(v) not in roles]
    ops = [v for v in order if v.children]
    if not ops:
        raise ValueError("the loss is a leaf: there is nothing to compile")
    for v in ops:
        if v.op not in OPCODES:
            raise ValueError(f"op {v.op!r} has no opcode; the tape knows {', '.join(n for n in OPCODES if n)}")
    if schedule:
        depth: dict[int, int] = {}
        for v in ops:  # children before parents, so their depths are known (a leaf's is 0)
            depth[id(v)] = 1 + max(depth.get(id(c), 0) for c in v.children)
        ops = sorted(ops, key=lambda v: (depth[id(v)], OPCODES[v.op]))  # sorted() is stable
    nodes = [*params, *inputs, *constants, *ops]
    slot = {id(v): i for i, v in enumerate(nodes)}
    n, n_leaves = len(nodes), len(nodes) - len(ops)
    opcode = np.zeros(n, dtype=np.int8)  # LEAF is 0
    a = np.full(n, -1, dtype=np.int32)
    b = np.full(n, -1, dtype=np.int32)
    arg = np.zeros(n, dtype=np.float64)
    for i, v in enumerate(ops, start=n_leaves):
        opcode[i] = OPCODES[v.op]
        a[i] = slot[id(v.children[0])]
        if len(v.children) > 1:
            b[i] = slot[id(v.children[1])]
        if v.arg is not None:
            arg[i] = v.arg
    return Tape(nodes, opcode, a, b, arg, len(params), len(inputs), n_leaves)
