"""`teenygrad.compile` (chapter 10): trace a function of Tensors once, then run the captured graph.

    step = tg.compile(train_step)          # train_step(x, y): forward, loss.backward(), opt.step(), opt.zero_grad()
    loss = step(x, y)                      # the first call traces; later calls with the same signature reuse it

The first call runs the function on lazy tensors (`capture/lazy.py`): every op, the backward pass (chapter 6's
engine, on the same rules) and the optimizer's update become one graph of `ir.py`'s primitives, its in-place
updates `assign`s. The back end compiles that graph into a `Program`; each call then only fills the program's
buffers (the arguments, the parameters' memory, Adam's m and v, the learning rate) and runs it.

What a trace depends on, and what makes a new one:
  * Tensor arguments: their shapes, dtypes and requires_grad are the signature; new ones trace again.
  * Python floats among the arguments are *inputs* (a learning-rate schedule does not re-trace); Python ints,
    bools, strings and None are part of the signature (a new value traces again: an int may be a shape).
    Other objects (a model, an optimizer) are keyed by identity.
  * Tensors the function reaches (parameters, module buffers) are read from their memory at every call; a
    change of their shape or dtype, or of whether a parameter's `.grad` exists, traces again (guards).
  * An optimizer's `lr` is read at every call; its other hyperparameters are guarded; its step counters move
    on the host at every call.
  * Any other Python value the function reads (a global float, an attribute) is frozen into the trace, as in
    every tracing compiler: pass what changes as an argument.
  * Random numbers (`rand`, `randn`, dropout) are drawn anew at every call, from the generator the eager
    function would use, in its order: with the same seed, compiled and eager steps draw the same numbers.

Results come back as new concrete Tensors without autograd history; parameters' `.grad` are set as an eager
step would leave them. Reading a traced tensor's value inside the function (`.item()`, `bool()`, `.numpy()`)
raises `CaptureError`, as do `tensor(data)` inside it and partial in-place writes. Index
values are data, so the graph counts out-of-range ones (embedding ids, gather and cross-entropy targets) and the
call raises IndexError, as eager code does (after the call's in-place updates, which were already written).
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable

import numpy as np

from teenygrad import autograd, tracing
from teenygrad.compiler import ir
from teenygrad.compiler.capture import lazy
from teenygrad.compiler.capture import nn as lazy_nn
from teenygrad.compiler.capture import ops as lazy_ops
from teenygrad.compiler.capture import views as lazy_views
from teenygrad.compiler.capture.lazy import CaptureError, EscapedTensor, LazyTensor, Trace, array_of, whole, wrap
from teenygrad.kernels.layout import contiguous_strides
from teenygrad.tensor import Tensor

__all__ = ["compile", "Compiled", "CaptureError", "ReferenceProgram", "compile_graph"]

HOOKS = types.SimpleNamespace(  # what the op layer calls while a trace runs (teenygrad.tracing)
    **{name: getattr(lazy_ops, name) for name in (
        "unary", "binary", "add_into", "reduce", "mean", "softmax", "softmax_backward", "matmul", "copy", "gather",
        "scatter_add", "cat", "full", "arange", "from_data", "random")},
    **{name: getattr(lazy_views, name) for name in (
        "reshape", "permute", "expand", "squeeze", "unsqueeze", "getitem", "into_zeros", "setitem")},
    **{name: getattr(lazy_nn, name) for name in lazy_nn.__all__})


# ---- the meeting point with the back end ----------------------------------------------------------------------

class ReferenceProgram:
    """A graph run by `ir.evaluate` (numpy, op by op): the reference the back end's compiled programs match.

    `inputs` lists every buffer the graph loads (a fixed order); calling it with one contiguous array per input
    returns the outputs' values and performs the assigns by copying into those arrays (after every read)."""

    def __init__(self, outputs: list[ir.Node], effects: list[ir.Node]) -> None:
        self.outputs, self.effects = list(outputs), list(effects)
        self.inputs: list[ir.Buffer] = []
        for node in ir.toposort(self.outputs + self.effects):
            if node.op == "load" and node.arg not in self.inputs:
                self.inputs.append(node.arg)

    def __call__(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        if len(arrays) != len(self.inputs):
            raise ValueError(f"program: {len(arrays)} arrays for {len(self.inputs)} inputs")
        for buf, arr in zip(self.inputs, arrays):
            object.__setattr__(buf, "array", arr)  # the oracle reads Buffer.array; reset below
        try:
            values = [np.array(v) for v in ir.evaluate(self.outputs + self.effects)]
        finally:
            for buf in self.inputs:
                object.__setattr__(buf, "array", None)
        slot = {buf: i for i, buf in enumerate(self.inputs)}
        for effect, value in zip(self.effects, values[len(self.outputs):]):
            np.copyto(arrays[slot[effect.srcs[0].arg]], value)
        return values[:len(self.outputs)]


BACKENDS = ("numba", "reference", "passes")


def _check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"teenygrad.compile: backend {backend!r} is not one of {', '.join(map(repr, BACKENDS))}")
    return backend


def compile_graph(outputs: list[ir.Node], effects: list[ir.Node], backend: str = "numba") -> Any:
    """The one place the front end meets the back end: a graph in, a `Program` out. `backend="numba"` compiles it
    (`teenygrad.compiler.backend`: passes, fusion, generated numba kernels); `"reference"` runs it op by op in numpy;
    `"passes"` runs op by op the graph the rewriting passes make of it (constant folding, dead code, CSE), to test
    those passes apart from fusion and code generation."""
    if _check_backend(backend) == "reference":
        return ReferenceProgram(outputs, effects)
    from teenygrad.compiler import backend as numba_backend  # imported on first use: `import teenygrad` stays light
    if backend == "passes":
        graph = numba_backend.rewrite(outputs, effects)
        return ReferenceProgram(graph.outputs, graph.effects)
    return numba_backend.compile_graph(outputs, effects)


# ---- signatures ---------------------------------------------------------------------------------------------------

def _flatten(value: Any, leaves: list) -> Any:
    """The signature of an argument, collecting its Tensor and float leaves in order."""
    if isinstance(value, LazyTensor):
        raise CaptureError("a traced tensor was passed to a compiled function from outside its trace")
    if isinstance(value, Tensor):
        leaves.append(value)
        return ("T", value.shape, value.dtype, value._requires_grad, value.grad is None, whole(value))
    if isinstance(value, float):
        leaves.append(value)
        return ("f",)
    if isinstance(value, np.ndarray):
        raise TypeError("compile: pass a Tensor, not a numpy array: the values of an array would be frozen into the "
                        "compiled program (tg.tensor(array) outside the function, then pass the Tensor)")
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_flatten(v, leaves) for v in value))
    if value is None or isinstance(value, (bool, int, str)):
        return ("v", type(value).__name__, value)
    return ("o", id(value))


def _unflatten(value: Any, leaves: list) -> Any:
    if isinstance(value, (Tensor, float)):
        return leaves.pop(0)
    if isinstance(value, (tuple, list)):
        return type(value)(_unflatten(v, leaves) for v in value)
    return value


def _grad_sig(g: Tensor | None) -> Any:
    return None if g is None else (g.shape, g.dtype)


# ---- one trace, ready to run -----------------------------------------------------------------------------------------

class _Entry:
    """One trace of the function: its program, how to fill the program's inputs, and what to do around a call."""

    def __init__(self, trace: Trace, program: Any, out_tree: Any, n_out: int, grads: list, n_checks: int,
                 rename: dict | None = None) -> None:
        self.trace, self.program, self.out_tree, self.n_out, self.grads = trace, program, out_tree, n_out, grads
        self.n_checks = n_checks  # the last outputs: counts of out-of-range indices, which must be 0
        rename = rename or {}  # a program shared with an identical earlier graph: its buffers -> this trace's
        self.getters = [trace.bindings[rename.get(buf, buf)] for buf in program.inputs]
        self.layouts = [(tuple(n.shape), contiguous_strides(tuple(n.shape))) for n in program.outputs]

    def guards_hold(self) -> bool:
        return all(fn() == expected for fn, expected, _ in self.trace.guards)

    def run(self, leaves: tuple) -> Any:
        self.trace.draw()  # this call's random numbers, if the function asks for any
        flat = [get(leaves) for get in self.getters]  # every input read before the host's counters move
        for effect in self.trace.host_effects:
            effect()
        if hasattr(self.program, "run_flat"):  # the numba back end: no checks, flat arrays in and out
            values = self.program.run_flat(flat)
        else:
            arrays = [a.reshape(b.shape) for a, b in zip(flat, self.program.inputs)]
            values = [np.ascontiguousarray(v).reshape(-1) for v in self.program(arrays)]
        if any(v.any() for v in values[len(values) - self.n_checks:]):
            raise IndexError("index out of range (an index tensor given to a compiled function: embedding ids, "
                             "gather or cross-entropy targets); this call's in-place updates were already written")
        outs = [Tensor._make(v, shape, strides, 0) for v, (shape, strides) in zip(values, self.layouts)]
        for target, slot in self.grads:  # .grad as the eager step leaves it (an argument: this call's tensor)
            target = leaves[target] if isinstance(target, int) else target
            target.grad = None if slot is None else outs[slot]
        return _build(self.out_tree, outs[:self.n_out])


def _build(tree: Any, outs: list) -> Any:
    kind = tree[0]
    if kind == "out":
        return outs[tree[1]]
    if kind == "seq":
        return tree[1](_build(t, outs) for t in tree[2])
    if kind == "dict":
        return {k: _build(t, outs) for k, t in tree[1].items()}
    return tree[1]


def _loads(roots: list[ir.Node]) -> list[ir.Buffer]:
    """The buffers a graph loads, in the order its nodes are printed."""
    return list(dict.fromkeys(n.arg for n in ir.toposort(roots) if n.op == "load"))


def _outputs(value: Any, nodes: list[ir.Node]) -> Any:
    """The structure of what the function returned, with lazy tensors replaced by output slots."""
    if isinstance(value, LazyTensor):
        nodes.append(value._node)
        return ("out", len(nodes) - 1)
    if isinstance(value, (tuple, list)):
        return ("seq", type(value), tuple(_outputs(v, nodes) for v in value))
    if isinstance(value, dict):
        return ("dict", {k: _outputs(v, nodes) for k, v in value.items()})
    return ("const", value)


class Compiled:
    """A function of Tensors, traced on its first call with each new signature (see the module docstring)."""

    def __init__(self, fn: Callable, backend: str = "numba") -> None:
        _check_backend(backend)  # a misspelt backend fails here, not at the first call
        self.fn, self.backend = fn, backend
        self.traces = 0  # how many times the function was traced
        self._cache: dict[Any, list[_Entry]] = {}
        self._programs: dict[str, tuple[Any, list[ir.Buffer]]] = {}  # graph text -> (program, its buffers)
        self._last: _Entry | None = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if tracing.active:  # called from inside another trace: its ops join that graph
            return self.fn(*args, **kwargs)
        leaves: list = []
        key = (_flatten(args, leaves), _flatten(tuple(sorted(kwargs.items())), leaves))
        for entry in self._cache.get(key, []):
            if entry.guards_hold():
                self._last = entry
                return entry.run(tuple(leaves))
        entry = self._trace(args, kwargs, leaves)
        self._cache.setdefault(key, []).append(entry)
        self._last = entry
        return entry.run(tuple(leaves))

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        """As a decorator on a method: `model.step(x)` calls the compiled function with the model first."""
        return self if obj is None else functools.partial(self, obj)

    @property
    def program(self) -> Any:
        """The program the last call ran (`backend.Program`: describe(), passes, source; or a ReferenceProgram)."""
        if self._last is None:
            raise RuntimeError("compile: the function has not been called yet")
        return self._last.program

    def graph(self) -> str:
        """The last trace's graph, one node per line (`ir.format_graph`): outputs first, then the assigns."""
        if self._last is None:
            raise RuntimeError("compile: the function has not been called yet")
        return next(text for text, (program, _) in self._programs.items() if program is self._last.program)

    def _trace(self, args: tuple, kwargs: dict, leaves: list) -> _Entry:
        trace = Trace(getattr(self.fn, "__name__", "fn"))
        record = autograd.record

        def watched_record(op: str, out: Tensor, inputs: tuple, /, **saved: object) -> Tensor:
            for x in inputs:  # every leaf that may get a .grad in this trace, with its .grad before it does
                trace.watch(x)
            return record(op, out, inputs, **saved)
        lazy.set_trace(trace)
        try:
            new_args, new_kwargs, arg_grads = self._standins(trace, args, kwargs, leaves)
            tracing.hooks, tracing.active, autograd.record = HOOKS, True, watched_record
            result = self.fn(*new_args, **new_kwargs)
            nodes: list[ir.Node] = []
            tree = _outputs(result, nodes)
            n_out = len(nodes)
            grads = []
            for p, initial in trace.params.values():
                trace.guards.append((lambda p=p: _grad_sig(p.grad), _grad_sig(initial), "whether .grad exists"))
                end = p.grad
                if isinstance(end, LazyTensor):
                    nodes.append(end._node)
                    grads.append((p, len(nodes) - 1))
                elif end is None:
                    grads.append((p, None))
                elif end is not initial:
                    raise CaptureError("compile: the function set a parameter's .grad to another tensor; only "
                                       "backward, zero_grad and clip_grad_norm may change .grad inside it")
            for i, t in arg_grads:
                if isinstance(t.grad, LazyTensor):
                    nodes.append(t.grad._node)
                    grads.append((i, len(nodes) - 1))
            n_checks = len(trace.checks)
            nodes.extend(trace.checks)
            effects = trace.effects()
        finally:
            tracing.active, tracing.hooks, autograd.record = False, None, record
            lazy.set_trace(None)
            for p, initial in trace.params.values():
                p.grad = initial  # the state before the call; running the program sets it
            for t in trace.created:
                t.__class__ = EscapedTensor  # any later use of a traced tensor says where it came from
        self.traces += 1
        # A new trace often gives the same graph (the second call of a step that starts with zero_grad: only
        # whether .grad existed changed); then the program compiled for it is reused, its buffers renamed.
        roots = nodes + effects
        text = ir.format_graph(roots)
        if text in self._programs:
            program, old_loads = self._programs[text]
            return _Entry(trace, program, tree, n_out, grads, n_checks, dict(zip(old_loads, _loads(roots))))
        program = compile_graph(nodes, effects, self.backend)
        self._programs[text] = (program, _loads(roots))
        return _Entry(trace, program, tree, n_out, grads, n_checks)


    @staticmethod
    def _standins(trace: Trace, args: tuple, kwargs: dict, leaves: list) -> tuple:
        """The lazy tensors the function gets in place of its Tensor and float arguments, each loading the call's
        own argument; an argument that requires grad is a leaf whose .grad the call sets on the caller's tensor."""
        standins, arg_grads = [], []
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, float):
                node = trace.bind(None, None, (), np.float64, lambda a, i=i: np.array([a[i]], np.float64), "f")
                standins.append(wrap(node, weak=True))
                continue
            node = trace.bind(None, None, leaf.shape, leaf.dtype, lambda a, i=i: array_of(a[i]), "x")
            t = wrap(node)
            t._arg_key = ("arg", i)  # an in-place write into it writes the caller's tensor
            trace.current[t._arg_key] = [leaf, node, node]
            if leaf._requires_grad:
                t._requires_grad = True
                if leaf.grad is not None:  # backward adds into it, as eagerly
                    t.grad = wrap(trace.bind(None, None, leaf.shape, leaf.grad.dtype,
                                             lambda a, i=i: array_of(a[i].grad), "xgrad"))
                arg_grads.append((i, t))
            standins.append(t)
        rest = list(standins)
        return _unflatten(args, rest), dict(_unflatten(tuple(sorted(kwargs.items())), rest)), arg_grads

def compile(fn: Callable, backend: str = "numba") -> Compiled:  # noqa: A001 - teenygrad.compile, as torch.compile
    """Trace `fn` (a function of Tensors) on its first call and run the captured graph from then on: compiled into
    generated numba kernels (`backend="numba"`), or op by op in numpy (`"reference"`, the oracle the compiled
    programs are tested against). See `teenygrad.compiler` for what is captured, what is an input and what makes
    a new trace."""
    return Compiled(fn, backend)
