"""Memory (chapter 10): where every stored value lives, planned once the kernels are fixed.

Each phase is one function, run in this order by `schedule`:
  - `write_in_copy_layout`: a product read only by a copy into another layout is written in that layout;
  - `keep_in_registers`: a reduction read only along the row inside its own kernel is never stored;
  - `input_slots`, `output_slots`: the caller's buffers, in order of first use, and fresh output arrays;
  - `assign_in_place`: an assign writes straight into its parameter when no later reader needs the old value;
  - `epilogues_in_place`: a matmul's epilogue overwrites the product when nothing else reads it;
  - `scratch_slots`: every other stored value gets scratch, reusing a slot once its last reader is done.
"""
from __future__ import annotations

from teenygrad.compiler import ir
from teenygrad.compiler.ir import Node
from teenygrad.compiler.passes import View
from teenygrad.compiler.schedule.items import LOOP, MATMUL, Kernel, Slot


def write_in_copy_layout(kernels: list[Kernel], want: set[int]) -> tuple[list[Kernel], dict, dict]:
    """A product read only by a copy into another layout (the heads put back side by side) is written in that
    layout, and the copy vanishes: its readers read the product's slot. Returns the kernels left, the strides
    each such product writes at (id(matmul) -> strides) and the copy it writes (id(matmul) -> the copy node)."""
    uses: dict[int, int] = {}
    for it in (it for kern in kernels for it in kern.items):
        for v in it.leaves:
            uses[id(v.srcs[0])] = uses.get(id(v.srcs[0]), 0) + 1
    writes: dict[int, tuple[int, ...]] = {}
    copied: dict[int, Node] = {}
    owner = {id(it.node): kern for kern in kernels for it in kern.items}
    kept = list(kernels)
    for kern in kernels:
        it = kern.items[0]
        mm = it.expr.srcs[0] if it.node.op == "contiguous" and it.expr.op == "view" else it.node
        if kern.kind == LOOP and len(kern.items) == 1 and mm.op == "matmul" and uses[id(mm)] == 1 and \
                len(owner[id(mm)].items) == 1 and id(mm) not in want and id(it.node) not in want and \
                (strides := permuted_write(it.expr.arg, mm.shape)) is not None:
            writes[id(mm)], copied[id(mm)] = strides, it.node
            kept.remove(kern)
    return kept, writes, copied


def kernel_readers(kernels: list[Kernel]) -> dict[int, set[int]]:
    """id(stored node) -> the kernels that read it through a view."""
    readers: dict[int, set[int]] = {}
    for k, kern in enumerate(kernels):
        for it in kern.items:
            for v in it.leaves:
                readers.setdefault(id(v.srcs[0]), set()).add(k)
    return readers


def keep_in_registers(kernels: list[Kernel], readers: dict[int, set[int]], want: set[int]) -> None:
    """Reductions read only along the row inside their own kernel stay in registers (`Kernel.local`)."""
    for k, kern in enumerate(kernels):
        for it in kern.items:
            n = it.node
            if n.op in ir.REDUCE and id(n) not in want and readers.get(id(n), set()) <= {k} and kern.kind == LOOP:
                kern.local.add(id(n))


def input_slots(order: list[Node], slots: dict[int, Slot]) -> tuple[list[ir.Buffer], dict[int, Slot]]:
    """Every buffer loaded, in order of first use: (the buffers, id(buffer) -> its slot)."""
    inputs: list[ir.Buffer] = []
    by_buffer: dict[int, Slot] = {}
    for n in order:
        if n.op == "load":
            if id(n.arg) not in by_buffer:
                by_buffer[id(n.arg)] = Slot("input", n.dtype, n.size, len(inputs))
                inputs.append(n.arg)
            slots[id(n)] = by_buffer[id(n.arg)]
    return inputs, by_buffer


def output_slots(outputs: list[Node], slots: dict[int, Slot]) -> list[Slot]:
    """The step's outputs: fresh arrays."""
    out_slots = []
    for i, n in enumerate(outputs):
        s = Slot("output", n.dtype, n.size, i)
        out_slots.append(s)
        slots.setdefault(id(n), s)
    return out_slots


def assign_in_place(effects: list[Node], order: list[Node], kernels: list[Kernel], readers: dict[int, set[int]],
                    slots: dict[int, Slot], by_buffer: dict[int, Slot]) -> list[tuple[Node, Slot]]:
    """Assigns write in place when no later kernel (nor another stage of this one) reads the old value; the rest
    are (value, target) copies made after the last kernel."""
    kernel_of = {id(it.node): k for k, kern in enumerate(kernels) for it in kern.items}
    copies: list[tuple[Node, Slot]] = []
    for e in effects:
        target, value = e.srcs
        tslot = by_buffer[id(target.arg)]
        if any(c[1] is tslot for c in copies) or any(s is tslot for s in assigned_in_place(slots, effects, e)):
            raise ValueError(f"compile_graph: buffer {target.arg.name!r} is assigned twice in one step")
        k = kernel_of[id(value)]
        kern = kernels[k]
        stage = next(it for it in kern.items if it.node is value)
        later = any(r > k for n in order if n.op == "load" and n.arg is target.arg for r in readers.get(id(n), ()))
        here = [v for it in kern.items for v in it.leaves if v.srcs[0].op == "load" and v.srcs[0].arg is target.arg]
        safe_here = all(v.arg.is_contiguous() and v.shape == value.shape and v in stage.leaves for v in here) and \
            not any(v in it.leaves for it in kern.items if it is not stage for v in here)
        if id(value) not in slots and kern.kind == LOOP and value.op not in ir.REDUCE and not later and safe_here:
            slots[id(value)] = tslot
        else:
            copies.append((value, tslot))
    return copies


def epilogues_in_place(kernels: list[Kernel], readers: dict[int, set[int]], slots: dict[int, Slot]) -> None:
    """A matmul's epilogue writes over the product when nothing else reads it (marked in the kernel's `local`)."""
    for k, kern in enumerate(kernels):
        if kern.kind == MATMUL and len(kern.items) >= 2:
            mm, epi = kern.items[0].node, kern.items[1].node
            if id(mm) not in slots and id(epi) not in slots and readers.get(id(mm), set()) <= {k}:
                kern.local.add(id(epi))


def scratch_slots(kernels: list[Kernel], readers: dict[int, set[int]], slots: dict[int, Slot],
                  copies: list[tuple[Node, Slot]], copied: dict[int, Node]) -> list[tuple[str, int]]:
    """Every other stored node gets a slot of scratch, reusing one whose last reader is done; returns the
    (dtype, size) of each scratch array."""
    last = {nid: max(ks) for nid, ks in readers.items()}
    for k, kern in enumerate(kernels):  # a product overwritten by its epilogue lives as long as the epilogue
        if kern.kind == MATMUL and len(kern.items) >= 2 and id(kern.items[1].node) in kern.local:
            mm, epi = kern.items[0].node, kern.items[1].node
            last[id(mm)] = max(last.get(id(mm), k), last.get(id(epi), k))
    for value, _ in copies:
        last[id(value)] = len(kernels)
    scratch: list[tuple[str, int]] = []
    free: list[int] = []
    live: dict[int, list[int]] = {}  # kernel index -> scratch indices to free after it
    for k, kern in enumerate(kernels):
        for it in kern.items:
            n = it.node
            if id(n) in slots or id(n) in kern.local and n.op in ir.REDUCE:
                continue
            if kern.kind == MATMUL and len(kern.items) > 1 and it is kern.items[1] and id(n) in kern.local:
                slots[id(n)] = slots[id(kern.items[0].node)]
                continue
            fits = [i for i in free if scratch[i][0] == n.dtype and scratch[i][1] >= n.size]
            if fits:
                i = min(fits, key=lambda j: scratch[j][1])
                free.remove(i)
            else:
                i = len(scratch)
                scratch.append((n.dtype, n.size))
            slots[id(n)] = Slot("scratch", n.dtype, n.size, i)
            if id(n) in copied:  # written in its copy's layout: the copy's readers read it here
                slots[id(copied[id(n)])] = slots[id(n)]
                last[id(n)] = last.get(id(copied[id(n)]), k)
            live.setdefault(max(last.get(id(n), k), k), []).append(i)
        free.extend(live.pop(k, []))
    return scratch


def permuted_write(v: View, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """Where a product of `shape` goes in the layout of a copy that reads it through view `v`, as one stride per
    axis of the product; None unless `v` only permutes the product's axes."""
    src, dst = View.contiguous(shape).strides, View.contiguous(v.shape).strides
    out, used = [0] * len(shape), set()
    for d, (n, stride) in enumerate(zip(v.shape, v.strides)):
        a = next((a for a in range(len(shape)) if a not in used and shape[a] == n and src[a] == stride), None)
        if n > 1 and a is None:
            return None
        if n > 1:
            used.add(a)
            out[a] = dst[d]
    return tuple(out) if v.offset == 0 and all(shape[a] == 1 for a in range(len(shape)) if a not in used) else None


def assigned_in_place(slots: dict[int, Slot], effects: list[Node], current: Node) -> list[Slot]:
    """Slots already claimed by earlier assigns done in place (to refuse two assigns to one buffer)."""
    out = []
    for e in effects:
        if e is current:
            break
        s = slots.get(id(e.srcs[1]))
        if s is not None and s.kind == "input":
            out.append(s)
    return out
