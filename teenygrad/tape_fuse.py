"""Chapter 5, last step: fusing each neuron's multiply-adds into one DOT node of the tape.

On the tape of an MLP nearly every slot is a MUL or an ADD: a neuron's  b + w0 x0 + w1 x1 + ...  is the chain

    m0 = w0 * x0;  s0 = b + m0;  m1 = w1 * x1;  s1 = s0 + m1;  ...

two slots per input, each dispatched on its opcode, written to memory and read back by the next, and the same
again backwards for its gradient. Only the last sum is read outside the chain. `fuse` rewrites every such
chain as ONE node (the sum in the same order, left to right, so the same value to the last bit):

    DOT:  data[i] = head + a_0 b_0 + a_1 b_1 + ... + a_{n-1} b_{n-1}

Its terms are stored CSR-style, as in a sparse matrix: the k-th product of the d-th DOT is
data[dot_a[k]] * data[dot_b[k]], for dot_start[d] <= k < dot_start[d + 1]. On the tape, a DOT node i has
opcode DOT, b[i] = d, a[i] = the head's slot and arg[i] = 1.0, or a[i] = -1 and arg[i] = 0.0 when the chain
starts with a product. Backward, with g = grad[i], is what the chain's nodes did, since each of its sums and
products has gradient exactly g (each is used once, by the next):

    grad[head] += g;    grad[dot_a[k]] += data[dot_b[k]] * g;    grad[dot_b[k]] += data[dot_a[k]] * g

A DOT whose products read consecutive slots on both sides (contiguous[d]: a neuron's weights are consecutive
parameters, its layer's inputs consecutive slots) is run as a plain dot product of two ranges of `data`, not
through dot_a and dot_b: see dot_forward and dot_backward.

Which nodes go: an ADD one of whose operands is a MUL used nowhere else (its *term*) is a *step*. The step's
other operand continues the chain if it is a step used nowhere else; otherwise it is the head (or, when it is
a MUL used nowhere else, the first term). A node used twice is never fused away: its value needs a slot.
`find_chains` is that analysis (exercise 5 asks for it); `fuse` checks the chains it returns and rewrites the tape.

One more saving: training needs d loss / d parameter, never d loss / d input. A first layer's products are
weight * pixel, so half of its backward work, grad[pixel] += weight * g, is thrown away. `fuse` puts the
input or constant of each product on the b side, and a DOT whose b operands are all inputs or constants
(grad_b[d] = 0) skips them. So a fused tape's backward leaves the inputs' and constants' gradients at 0; the
parameters and every op slot get theirs, as before.

    tape = fuse(compile(loss, inputs=xs + ts, params=model.parameters()))   # compile: teenygrad.tape

A fused tape is a `Tape` (set_inputs, forward, backward, sgd_step, fit, slots, sync_values) with fewer slots;
the nodes fused away have no slot (slots() does not find them, sync_values leaves them alone), and opcode
overrides, which name the per-node opcodes, need the unfused tape.
"""
from __future__ import annotations

import numpy as np

from teenygrad.edition import exercise
from teenygrad.kernels.jit import kernel
from teenygrad.tape import ADD, MUL, OP_NAMES, Tape, backward_kernel, forward_kernel, py_func, sgd_kernel, zero_and_seed

DOT = len(OP_NAMES)  # the next free opcode: not a Value op, only fused tapes have it


# --- the kernels: DOT nodes, and the run-by-run interpreter with a DOT branch -----------------------------------

@kernel
def dot_forward(a, b, arg, data, dot_start, dot_a, dot_b, grad_b, contiguous, lo, hi):
    """data[i] = head + sum_k data[dot_a[k]] * data[dot_b[k]] for the DOT nodes lo <= i < hi, summed in order.

    Two speed-ups, with the same sums. When a DOT's operands are consecutive slots (contiguous[d]: a neuron's
    weights are, and so are its layer's inputs), the loop reads data[a0 + t] * data[b0 + t], not through
    dot_a and dot_b. And a sum in order is a chain of adds, each waiting for the one before, so two such
    neighbouring DOTs with as many products (two neurons of a layer) are summed side by side in one loop: two
    independent chains, which the CPU overlaps, each in its own order. (A run never holds a DOT that reads
    another: see FusedTape.)"""
    i = lo
    while i < hi:
        d = b[i]
        k0 = dot_start[d]
        n = dot_start[d + 1] - k0
        s0 = data[a[i]] if arg[i] != 0.0 else -0.0  # no head: start from -0.0, which adds as an exact nothing
        if not contiguous[d]:
            for k in range(k0, k0 + n):
                s0 = s0 + data[dot_a[k]] * data[dot_b[k]]
            data[i] = s0
            i += 1
            continue
        a0, b0 = dot_a[k0], dot_b[k0]
        if i + 1 < hi and contiguous[b[i + 1]] and dot_start[b[i + 1] + 1] - dot_start[b[i + 1]] == n:
            a1, b1 = dot_a[dot_start[b[i + 1]]], dot_b[dot_start[b[i + 1]]]
            s1 = data[a[i + 1]] if arg[i + 1] != 0.0 else -0.0
            for t in range(n):
                s0 = s0 + data[a0 + t] * data[b0 + t]
                s1 = s1 + data[a1 + t] * data[b1 + t]
            data[i], data[i + 1] = s0, s1
            i += 2
        else:
            for t in range(n):
                s0 = s0 + data[a0 + t] * data[b0 + t]
            data[i] = s0
            i += 1


@kernel
def dot_backward(a, b, arg, data, grad, dot_start, dot_a, dot_b, grad_b, contiguous, lo, hi):
    """For the DOT nodes hi > i >= lo: grad[head] += g, and each product passes g on as a MUL does, except
    to the b side of a DOT whose grad_b[d] is 0 (its b operands are inputs or constants: no gradient needed).
    A contiguous DOT's loops run over two ranges of slots, which numba turns into vector instructions."""
    for i in range(hi - 1, lo - 1, -1):
        g = grad[i]
        d = b[i]
        if arg[i] != 0.0:
            grad[a[i]] += g
        k0, k1 = dot_start[d], dot_start[d + 1]
        if contiguous[d]:
            a0, b0 = dot_a[k0], dot_b[k0]
            for t in range(k1 - k0):
                grad[a0 + t] += data[b0 + t] * g
            if grad_b[d]:
                for t in range(k1 - k0):
                    grad[b0 + t] += data[a0 + t] * g
        elif grad_b[d]:
            for k in range(k0, k1):
                j, m = dot_a[k], dot_b[k]
                grad[j] += data[m] * g
                grad[m] += data[j] * g
        else:  # half the work: a first layer's products are weight * pixel, and no one needs d loss / d pixel
            for k in range(k0, k1):
                grad[dot_a[k]] += data[dot_b[k]] * g


@kernel
def forward_fused(opcode, a, b, arg, data, runs, dot_start, dot_a, dot_b, grad_b, contiguous):
    """Run by run: the runs of DOT nodes by dot_forward, the others (few, once fused) by forward_kernel.
    (Not forward_runs: handing it runs[s:s + 2] would make a new array per run, and in numba that costs more
    than the few ops left in a run.)"""
    for s in range(runs.shape[0] - 1):
        lo, hi = runs[s], runs[s + 1]
        if opcode[lo] == DOT:
            dot_forward(a, b, arg, data, dot_start, dot_a, dot_b, grad_b, contiguous, lo, hi)
        else:
            forward_kernel(opcode, a, b, arg, data, lo, hi)


@kernel
def backward_fused(opcode, a, b, arg, data, grad, runs, dot_start, dot_a, dot_b, grad_b, contiguous, n_params):
    """forward_fused's runs backwards, last run first, with dot_backward and backward_kernel. The inputs' and
    constants' gradients (slots n_params to runs[0]) end at 0: the DOTs skip them, so what other ops add would
    be partial."""
    for s in range(runs.shape[0] - 2, -1, -1):
        lo, hi = runs[s], runs[s + 1]
        if opcode[lo] == DOT:
            dot_backward(a, b, arg, data, grad, dot_start, dot_a, dot_b, grad_b, contiguous, lo, hi)
        else:
            backward_kernel(opcode, a, b, arg, data, grad, lo, hi)
    grad[n_params:runs[0]] = 0.0


@kernel
def fit_fused(opcode, a, b, arg, data, grad, runs, dot_start, dot_a, dot_b, grad_b, contiguous, rows, n_params, lr,
              losses):
    """tape.fit_kernel on a fused tape: per-example SGD over `rows` in one compiled call."""
    n = opcode.shape[0]
    for r in range(rows.shape[0]):
        for k in range(rows.shape[1]):  # set_inputs
            data[n_params + k] = rows[r, k]
        forward_fused(opcode, a, b, arg, data, runs, dot_start, dot_a, dot_b, grad_b, contiguous)
        losses[r] = data[n - 1]
        zero_and_seed(grad, 0, n - 1)
        backward_fused(opcode, a, b, arg, data, grad, runs, dot_start, dot_a, dot_b, grad_b, contiguous,
                       n_params)
        sgd_kernel(data, grad, 0, n_params, lr)


# --- the fused tape ---------------------------------------------------------------------------------------------

class FusedTape(Tape):
    """A Tape whose multiply-add chains are DOT nodes; build one with `fuse(tape)`."""

    def __init__(self, nodes, opcode, a, b, arg, n_params, n_inputs, n_leaves, data, dot_start, dot_a, dot_b,
                 grad_b, contiguous):
        super().__init__(nodes, opcode, a, b, arg, n_params, n_inputs, n_leaves)
        self.data[:] = data  # the unfused tape's values, which may have trained past the Values'
        self.dot_start, self.dot_a, self.dot_b = dot_start, dot_a, dot_b
        self.grad_b, self.contiguous = grad_b, contiguous  # per DOT: gradients to the b side? consecutive slots?
        # unsigned, as in Tape.__init__: no negative-index check per product (k, from dot_start, is unsigned too)
        self._dots = (dot_start.view(np.uint64), dot_a.view(np.uint32), dot_b.view(np.uint32), grad_b, contiguous)
        # a run of DOTs ends before a DOT that reads one of its run, so dot_forward may sum neighbours together
        runs = set(self.runs.tolist())
        for i in np.flatnonzero(opcode == DOT).tolist():
            terms = slice(dot_start[b[i]], dot_start[b[i] + 1])
            if max(a[i], dot_a[terms].max(), dot_b[terms].max()) >= max(r for r in runs if r <= i):
                runs.add(i)
        self.runs = np.array(sorted(runs), dtype=np.int64)

    def __repr__(self) -> str:
        return f"Fused{super().__repr__()[:-1]}, {len(self.dot_start) - 1} dots of {len(self.dot_a)} products)"

    def forward(self, python: bool = False, overrides: dict | None = None) -> float:
        self._no_overrides(overrides)
        args = (self._ua, self._ub, self.arg, self.data)
        if not python:
            forward_fused(self.opcode, *args, self.runs, *self._dots)
            return self.loss
        for lo, hi in zip(self.runs[:-1].tolist(), self.runs[1:].tolist()):  # the same loop, in plain Python
            if self.opcode[lo] == DOT:
                py_func(dot_forward)(*args, *self._dots, lo, hi)
            else:
                py_func(forward_kernel)(self.opcode, *args, lo, hi)
        return self.loss

    def backward(self, python: bool = False, overrides: dict | None = None, accumulate: bool = False) -> None:
        """d loss / d slot for the parameters and every op slot; inputs and constants get 0 (see backward_fused)."""
        self._no_overrides(overrides)
        zero_and_seed(self.grad, self.n_params if accumulate else 0, self.root)
        args = (self._ua, self._ub, self.arg, self.data, self.grad)
        if not python:
            backward_fused(self.opcode, *args, self.runs, *self._dots, self.n_params)
            return
        for lo, hi in zip(self.runs[-2::-1].tolist(), self.runs[:0:-1].tolist()):
            if self.opcode[lo] == DOT:
                py_func(dot_backward)(*args, *self._dots, lo, hi)
            else:
                py_func(backward_kernel)(self.opcode, *args, lo, hi)
        self.grad[self.n_params:self.n_leaves] = 0.0

    @staticmethod
    def _no_overrides(overrides: dict | None) -> None:
        if overrides:
            raise ValueError("a fused tape has DOT nodes where the MULs and ADDs were: override opcodes on the "
                             "unfused tape (the one compile returns, before fuse)")

    def fit(self, rows: np.ndarray, lr: float) -> np.ndarray:
        rows = self._rows(rows)
        losses = np.empty(rows.shape[0], dtype=np.float64)
        fit_fused(self.opcode, self._ua, self._ub, self.arg, self.data, self.grad, self.runs, *self._dots, rows,
                  self.n_params, lr, losses)
        return losses

    def _instruction(self, i: int) -> tuple[str, str]:
        if self.opcode[i] != DOT:
            return super()._instruction(i)
        ks = range(self.dot_start[self.b[i]], self.dot_start[self.b[i] + 1])
        terms = [f"{self.dot_a[k]}*{self.dot_b[k]}" for k in ks[:2]] + ["..."] * (len(ks) > 2)
        return "dot", (f"{self.a[i]} + " if self.arg[i] else "") + " + ".join(terms) + f"  ({len(ks)} products)"


@exercise("05-scalar-autograd", "find_chains")
def find_chains(opcode: np.ndarray, a: np.ndarray, b: np.ndarray, n_leaves: int) -> dict[int, tuple[int, list[int]]]:
    """The multiply-add chains of a tape, as {end: (head, terms)}: the analysis half of the fusion pass.

    opcode, a, b: the tape's arrays (a[i], b[i] the operand slots of op slot i, -1 when absent; slots below
    n_leaves are leaves). A *term* is a MUL used exactly once (by one operand of one op). A *step* is an ADD
    with a term operand: b if b is a term, else a; its other operand is its `prev`. A chain runs from its end,
    a step, back through prev while prev is a step used exactly once (by this step, as its prev); there it
    stops at the head: the slot its last prev names, or -1 when that prev is itself a term (then it is the
    chain's first term). terms lists the chain's terms in the order the chain adds them, first to last.
    Every step that is not fused into a later one ends a chain."""
    n = len(opcode)
    has_b = b >= 0
    has_b[:n_leaves] = False
    uses = np.bincount(np.concatenate([a[n_leaves:], b[has_b]]), minlength=n)  # how many operands name each slot
    user = np.full(n, -1, dtype=np.int64)  # who uses it (meaningful for a slot used once)
    user[a[n_leaves:]] = np.arange(n_leaves, n)
    user[b[has_b]] = np.flatnonzero(has_b)
    term_mul = (opcode == MUL) & (uses == 1)  # a product that can become a term
    term = np.full(n, -1, dtype=np.int64)  # each step's term, and its other operand
    prev = np.full(n, -1, dtype=np.int64)
    for i in np.flatnonzero(opcode == ADD).tolist():
        if term_mul[b[i]]:
            term[i], prev[i] = b[i], a[i]
        elif term_mul[a[i]]:
            term[i], prev[i] = a[i], b[i]
    step = term >= 0
    interior = step & (uses == 1)  # used once, and by a step that continues it: fused away
    interior[interior] = prev[user[interior]] == np.flatnonzero(interior)
    chains: dict[int, tuple[int, list[int]]] = {}
    for end in np.flatnonzero(step & ~interior).tolist():
        terms, p = [int(term[end])], int(prev[end])
        while interior[p]:  # walk back to the head, collecting the terms last first
            terms.append(int(term[p]))
            p = int(prev[p])
        if term_mul[p]:  # a product at the head of the chain is its first term
            terms.append(p)
            p = -1
        chains[end] = (p, terms[::-1])
    return chains


def _fused_away(opcode: np.ndarray, a: np.ndarray, b: np.ndarray, n_leaves: int,
                chains: dict[int, tuple[int, list[int]]]) -> np.ndarray:
    """The slots the chains replace (their terms, and their steps but the end), checked: each must be used once,
    by its own chain, or fusing it away would lose a value that something else reads."""
    n = len(opcode)
    has_b = b >= 0
    has_b[:n_leaves] = False
    uses = np.bincount(np.concatenate([a[n_leaves:], b[has_b]]), minlength=n)
    gone = np.zeros(n, dtype=bool)

    def bad(end: int, why: str) -> ValueError:
        return ValueError(f"find_chains returned a chain ending at slot {end} that {why}")

    for end, (head, terms) in chains.items():
        if not (n_leaves <= end < n and opcode[end] == ADD) or len(terms) < 1 + (head < 0):
            raise bad(end, "is not an ADD slot with its terms")
        for t in terms:
            if not (n_leaves <= t < n and opcode[t] == MUL and uses[t] == 1):
                raise bad(end, f"has term {t}, which is not a MUL used once")
        node, first = end, 1 if head < 0 else 0  # with no head, the first term is the first step's other operand
        for k in range(len(terms) - 1, first - 1, -1):  # each step, from the end back, adds terms[k] to its prev
            if opcode[node] != ADD or terms[k] not in (a[node], b[node]):
                raise bad(end, f"does not add its term {terms[k]} at slot {node}")
            if node != end:
                if uses[node] != 1:
                    raise bad(end, f"fuses away the partial sum at slot {node}, which is used elsewhere too")
                gone[node] = True
            node = int(b[node] if a[node] == terms[k] else a[node])
        if node != (head if head >= 0 else terms[0]):
            raise bad(end, f"reaches slot {node} where its head {head} should be")
        gone[terms] = True
    if gone[list(chains)].any():
        raise ValueError("find_chains returned a chain whose end is fused away into another chain")
    return gone


def fuse(tape: Tape) -> FusedTape:
    """The same computation as `tape`, each chain of multiply-adds one DOT node (see the module docstring)."""
    if isinstance(tape, FusedTape):
        return tape
    lo = tape.n_leaves
    opcode, a, b = tape.opcode, tape.a.astype(np.int64), tape.b.astype(np.int64)
    chains = find_chains(opcode.copy(), a.copy(), b.copy(), lo)
    chains = {int(end): (int(head), [int(t) for t in terms]) for end, (head, terms) in chains.items()}
    keep = ~_fused_away(opcode, a, b, lo, chains)
    slot = np.cumsum(keep) - 1  # the new slot of each kept node
    kept = np.flatnonzero(keep)
    opcode, arg = opcode[kept], tape.arg[kept]
    new_a = np.where(a[kept] >= 0, slot[a[kept]], -1).astype(np.int32)
    new_b = np.where(b[kept] >= 0, slot[b[kept]], -1).astype(np.int32)
    no_grad = np.zeros(len(kept), dtype=bool)  # inputs and constants: nothing needs their gradient
    no_grad[tape.n_params:lo] = True
    dot_start, dot_a, dot_b, grad_b, contiguous = [0], [], [], [], []
    for j in np.flatnonzero(np.isin(kept, list(chains))).tolist():
        head, terms = chains[int(kept[j])]
        opcode[j], new_a[j], new_b[j], arg[j] = DOT, slot[head] if head >= 0 else -1, len(grad_b), head >= 0
        pairs = [(int(slot[a[t]]), int(slot[b[t]])) for t in terms]
        pairs = [(y, x) if no_grad[x] and not no_grad[y] else (x, y) for x, y in pairs]  # a no-gradient side to b
        dot_a += [x for x, _ in pairs]
        dot_b += [y for _, y in pairs]
        dot_start.append(len(dot_a))
        grad_b.append(not all(no_grad[y] for _, y in pairs))
        contiguous.append(all(x == pairs[0][0] + k and y == pairs[0][1] + k for k, (x, y) in enumerate(pairs)))
    return FusedTape([tape.nodes[i] for i in kept.tolist()], opcode, new_a, new_b, arg, tape.n_params,
                     tape.n_inputs, lo, tape.data[kept], np.array(dot_start, dtype=np.int64),
                     np.array(dot_a, dtype=np.int32), np.array(dot_b, dtype=np.int32), np.array(grad_b, dtype=np.uint8),
                     np.array(contiguous, dtype=np.uint8))
