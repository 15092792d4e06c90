"""Chapter 5: automatic differentiation on scalars, the way micrograd does it.

A `Value` is one number in a computation, plus the record of how it was computed: the `op` that made it,
its `children` (the operands), and the op's *local gradients* d(this)/d(child), computed right away in the
forward pass. `loss.backward()` then applies the chain rule from the loss down to the leaves:

    d loss / d child  +=  (d loss / d node) * (d node / d child)        for every node, parents first

`+=` and not `=`: a node used twice (a "diamond": `y = x * x`, or `x` feeding two branches) receives one
contribution per use, and the chain rule says to add them.

"Parents first" is the reverse of a *topological order* (every node after its children), which
`topological_order` computes with an explicit stack, so a graph deeper than Python's recursion limit
(a long chain of additions) still works.

Every op is a *rule*: a plain function of numbers returning its result and its local gradients side by
side, e.g. `mul(a, b) -> (a * b, (b, a))`. The rules live in the table `RULES`, looked up on every use.

Exercise 5 asks for the backward pass (`topological_order` and `Value.backward`) and for every rule but `add`
and `mul`, which chapter 5 writes (marked `@exercise`); a learner's pieces go in with `teenygrad.edition.install`.
Seams for experiments:
- `use_op(mul=my_mul)`: a context manager that swaps the rule of one op (any name in `RULES`) for a
  function with the same signature, for the Values built inside the `with` block.
- `loss.backward(order_fn=my_topological_order)`: backpropagate along a learner's order instead of
  `topological_order`. `check_topological(order, root)` says what is wrong with an order, if anything.
- `gradient_check(f, xs)`: backprop gradients next to central finite differences, to test either.
"""
from __future__ import annotations

import math
from typing import Callable, ContextManager, Sequence

from teenygrad._swap import swapped
from teenygrad.edition import exercise

Number = float | int
# A rule maps the operand numbers to (result, local gradients): one d result / d operand per operand.
Rule = Callable[..., tuple[float, tuple[float, ...]]]


# --- the ops: forward and local gradient side by side -------------------------------------------------------
# Local gradients are computed from the forward's own result where that is cheaper (exp, tanh, sigmoid).

def add(a: float, b: float) -> tuple[float, tuple[float, ...]]:
    """a + b;  d/da = 1, d/db = 1."""
    return a + b, (1.0, 1.0)


@exercise("05-scalar-autograd", "rules")
def sub(a: float, b: float) -> tuple[float, tuple[float, ...]]:
    """a - b;  d/da = 1, d/db = -1."""
    return a - b, (1.0, -1.0)


def mul(a: float, b: float) -> tuple[float, tuple[float, ...]]:
    """a * b;  d/da = b, d/db = a."""
    return a * b, (b, a)


@exercise("05-scalar-autograd", "rules")
def div(a: float, b: float) -> tuple[float, tuple[float, ...]]:
    """a / b;  d/da = 1/b, d/db = -a/b^2. b = 0 raises ZeroDivisionError, as Python's / does."""
    return a / b, (1.0 / b, -a / (b * b))


@exercise("05-scalar-autograd", "rules")
def power(a: float, k: float) -> tuple[float, tuple[float, ...]]:
    """a ** k for a constant number k;  d/da = k a^(k-1). (k is not a node, so it gets no gradient.)

    Both through math.pow, which raises ValueError where the real power is undefined (a negative a, a fractional k;
    0 to a negative power)."""
    return math.pow(a, k), (k * math.pow(a, k - 1.0),)  # math.pow raises on (-8) ** 0.5; `**` would go complex


@exercise("05-scalar-autograd", "rules")
def neg(a: float) -> tuple[float, tuple[float, ...]]:
    """-a;  d/da = -1."""
    return -a, (-1.0,)


@exercise("05-scalar-autograd", "rules")
def exp(a: float) -> tuple[float, tuple[float, ...]]:
    """e^a;  d/da = e^a (the result itself: one exponential, not two). Past a = 709.78 e^a is not a float64, and
    math.exp raises OverflowError."""
    e = math.exp(a)
    return e, (e,)


@exercise("05-scalar-autograd", "rules")
def log(a: float) -> tuple[float, tuple[float, ...]]:
    """ln a (a > 0; math.log raises ValueError otherwise);  d/da = 1/a."""
    return math.log(a), (1.0 / a,)


@exercise("05-scalar-autograd", "rules")
def tanh(a: float) -> tuple[float, tuple[float, ...]]:
    """tanh a;  d/da = 1 - tanh(a)^2, from the result (math.tanh is exact to 1 at large |a|: no overflow)."""
    t = math.tanh(a)
    return t, (1.0 - t * t,)


@exercise("05-scalar-autograd", "rules")
def relu(a: float) -> tuple[float, tuple[float, ...]]:
    """max(a, 0);  d/da = 1 if a > 0 else 0 (we pick 0 at the kink a = 0)."""
    return (a, (1.0,)) if a > 0.0 else (0.0, (0.0,))


@exercise("05-scalar-autograd", "rules")
def sigmoid(a: float) -> tuple[float, tuple[float, ...]]:
    """s = 1 / (1 + e^-a);  d/da = s (1 - s). For every float a: e^x is never taken of a large positive x (it
    would overflow), and a small s keeps its relative accuracy (s(-700) = 1e-304, not 0): for a < 0,
    s = e^a / (1 + e^a)."""
    if a >= 0.0:
        s = 1.0 / (1.0 + math.exp(-a))
    else:
        e = math.exp(a)
        s = e / (1.0 + e)
    return s, (s * (1.0 - s),)


@exercise("05-scalar-autograd", "rules")
def maximum(a: float, b: float) -> tuple[float, tuple[float, ...]]:
    """max(a, b);  the gradient goes to the larger operand (to a on a tie)."""
    return (a, (1.0, 0.0)) if a >= b else (b, (0.0, 1.0))


# Op name -> rule. Value's methods look a rule up here each time, so `use_op` can swap one.
RULES: dict[str, Rule] = {"add": add, "sub": sub, "mul": mul, "div": div, "pow": power, "neg": neg, "exp": exp,
                          "log": log, "tanh": tanh, "relu": relu, "sigmoid": sigmoid, "max": maximum}


def use_op(**rules: Rule) -> ContextManager[None]:
    """Within the block, build Values with these rules instead of the built-in ones.

        def my_mul(a, b):
            return a * b, (b, a)
        with use_op(mul=my_mul):
            loss = (x * y + 1).tanh()   # every * here runs my_mul, forward and local gradients
        loss.backward()                 # backward uses the local gradients my_mul returned
    """
    return swapped(RULES, "op", **rules)


# --- Value ---------------------------------------------------------------------------------------------------

class Value:
    """A scalar in an expression graph. `data` is its value, `grad` is d(loss)/d(this) after `backward()`."""

    __slots__ = ("data", "grad", "children", "op", "local_grads", "arg")  # no per-object dict: graphs are big

    def __init__(self, data: Number, children: tuple[Value, ...] = (), op: str = "",
                 local_grads: tuple[float, ...] = (), arg: float | None = None):
        self.data = float(data)
        self.grad = 0.0
        self.children = children        # operands, in order; () for a leaf (an input, a parameter, a constant)
        self.op = op                    # name of the rule in RULES that made it; "" for a leaf
        self.local_grads = local_grads  # d(self)/d(child) for each child, filled in by the forward pass
        self.arg = arg                  # a constant that is not a node: the exponent of "pow"

    def __repr__(self) -> str:
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g}{', op=' + self.op if self.op else ''})"

    @staticmethod
    def _apply(op: str, *children: Value, arg: float | None = None) -> Value:
        """Run the rule for `op` on the children's data and record the result as a new node."""
        if arg is not None:
            data, local_grads = RULES[op](children[0].data, arg)
        elif len(children) == 2:
            data, local_grads = RULES[op](children[0].data, children[1].data)
        else:
            data, local_grads = RULES[op](children[0].data)
        if len(local_grads) != len(children):  # a swapped-in rule must give one gradient per operand
            raise ValueError(f"rule for {op!r} returned {len(local_grads)} local gradients for {len(children)} "
                             f"operands")
        return Value(data, children, op, local_grads, arg)

    # binary ops: a Python number on either side becomes a constant leaf
    def __add__(self, other: Value | Number) -> Value:
        return Value._apply("add", self, _as_value(other))

    def __radd__(self, other: Number) -> Value:
        return Value._apply("add", _as_value(other), self)

    def __sub__(self, other: Value | Number) -> Value:
        return Value._apply("sub", self, _as_value(other))

    def __rsub__(self, other: Number) -> Value:
        return Value._apply("sub", _as_value(other), self)

    def __mul__(self, other: Value | Number) -> Value:
        return Value._apply("mul", self, _as_value(other))

    def __rmul__(self, other: Number) -> Value:
        return Value._apply("mul", _as_value(other), self)

    def __truediv__(self, other: Value | Number) -> Value:
        return Value._apply("div", self, _as_value(other))

    def __rtruediv__(self, other: Number) -> Value:
        return Value._apply("div", _as_value(other), self)

    def __pow__(self, k: Number) -> Value:
        if not isinstance(k, (int, float)):  # d/dk of a^k would need log(a), defined only for a > 0
            raise TypeError(f"Value ** {type(k).__name__}: the exponent must be a Python number; for a "
                            f"Value exponent k write (k * a.log()).exp() (needs a > 0)")
        return Value._apply("pow", self, arg=float(k))

    def __rpow__(self, base: Number) -> Value:
        raise TypeError("number ** Value is not an op: write (x * math.log(base)).exp() for base > 0")

    def __neg__(self) -> Value:
        return Value._apply("neg", self)

    def exp(self) -> Value:
        return Value._apply("exp", self)

    def log(self) -> Value:
        return Value._apply("log", self)

    def tanh(self) -> Value:
        return Value._apply("tanh", self)

    def relu(self) -> Value:
        return Value._apply("relu", self)

    def sigmoid(self) -> Value:
        return Value._apply("sigmoid", self)

    def max(self, other: Value | Number) -> Value:
        return Value._apply("max", self, _as_value(other))

    @exercise("05-scalar-autograd", "backward")
    def backward(self, order_fn: Callable[[Value], list[Value]] | None = None) -> None:
        """Fill in `grad` for every node this one depends on: d(self)/d(node). Returns None.

        `order_fn(self)` (default `topological_order`) lists the nodes, each after its children; backward walks
        it from the end, so a node's gradient is complete (every parent has added its part) before it is passed
        on: child.grad += local * node.grad for each child and its local gradient, `+=` because a node used
        twice (x * x, or x feeding two branches) gets one contribution per use. self.grad is set to 1.
        Interior nodes (those with children) start from 0 on every call; leaves *accumulate* across calls
        (zero them yourself between steps, as with any optimiser). No recursion: a chain of 100,000 nodes works.
        """
        order = (order_fn or topological_order)(self)
        for node in order:
            if node.children:
                node.grad = 0.0
        self.grad = 1.0  # d self / d self
        for node in reversed(order):  # parents before children: node.grad is complete when we reach it
            for child, local in zip(node.children, node.local_grads):
                child.grad += local * node.grad  # chain rule; += because a child may have several parents


def _as_value(x: Value | Number) -> Value:
    if isinstance(x, Value):
        return x
    if isinstance(x, (int, float)):
        return Value(x)  # a constant leaf
    raise TypeError(f"cannot combine a Value with {type(x).__name__}")


# --- the topological sort ------------------------------------------------------------------------------------

@exercise("05-scalar-autograd", "backward")
def topological_order(root: Value) -> list[Value]:
    """Every node `root` depends on, each exactly once, each after all of its children; `root` is last.

    Exactly the order of the recursive depth-first search `visit(root)`, where visit(node) does nothing for a
    node already visited, and otherwise visits node.children in order (first child first) and then appends
    node. But with an explicit stack instead of recursion, so a graph deeper than Python's recursion limit (a
    long chain of additions) works. Nodes are told apart by identity (`id`), never by value.
    """
    order: list[Value] = []
    seen: set[int] = set()  # ids of nodes already expanded (Values hash by identity too, but ids are faster)
    stack: list[tuple[Value, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
        elif id(node) not in seen:
            seen.add(id(node))
            stack.append((node, True))  # comes back up after all the children pushed above it
            for child in reversed(node.children):  # reversed: the first child ends on top, visited first
                if id(child) not in seen:
                    stack.append((child, False))
    return order


def check_topological(order: Sequence[Value], root: Value) -> str | None:
    """None if `order` holds exactly the nodes of root's graph, once each, children before parents; else why not."""
    position: dict[int, int] = {}
    for i, node in enumerate(order):
        if id(node) in position:
            return f"node {node!r} appears twice (positions {position[id(node)]} and {i})"
        position[id(node)] = i
    graph, stack = {id(root)}, [root]  # the nodes root depends on, in no particular order
    while stack:
        for child in stack.pop().children:
            if id(child) not in graph:
                graph.add(id(child))
                stack.append(child)
    if len(graph) != len(order) or any(i not in position for i in graph):
        return f"order has {len(order)} nodes, the graph has {len(graph)} (some missing or foreign)"
    for node in order:
        for child in node.children:
            if position[id(child)] > position[id(node)]:
                return f"{node!r} at {position[id(node)]} comes before its child {child!r} at {position[id(child)]}"
    return None


# --- gradient checking ---------------------------------------------------------------------------------------

def gradient_check(f: Callable[[list[Value]], Value], xs: Sequence[float],
                   eps: float = 1e-6) -> tuple[list[float], list[float]]:
    """(backprop gradient, central finite-difference gradient) of f at xs, for comparing.

    `f` builds a fresh graph from a list of leaf Values. Central differences,
    (f(x + eps) - f(x - eps)) / (2 eps), are accurate to O(eps^2), away from kinks like relu's at 0.
    """
    leaves = [Value(x) for x in xs]
    f(leaves).backward()
    analytic = [v.grad for v in leaves]
    numeric = []
    for i in range(len(xs)):
        up = [x + eps if j == i else x for j, x in enumerate(xs)]
        down = [x - eps if j == i else x for j, x in enumerate(xs)]
        numeric.append((f([Value(x) for x in up]).data - f([Value(x) for x in down]).data) / (2 * eps))
    return analytic, numeric
