"""Movement ops (chapters 2 and 6): views, copies and casts, indexing and joining, with their gradient rules.

Views (reshape, permute, expand, slicing: `teenygrad.tensor_views`) copy nothing; their rules move g back
through the same index map. Indexing reads some elements many times or not at all, so its gradient
*scatters*: each read adds its gradient where it read from (`scatter_add`, gather's, is a piece of exercise 6,
and `index_add`, index_select's, a piece of exercise 8, each with its kernel inside it).
"""
from __future__ import annotations

from typing import Sequence

from teenygrad import autograd, devices, tracing
from teenygrad.edition import exercise
from teenygrad.kernels import on
from teenygrad.kernels.elementwise import u
from teenygrad.kernels.jit import kernel
from teenygrad.kernels.layout import normalize_axis, prod
from teenygrad.kernels.movement import checked_index
from teenygrad.ops.buffers import contiguous, copy_into, detached, new, result_dtype
from teenygrad.tensor import Tensor, int64, zeros
from teenygrad.tensor_views import basic_index


@exercise("06-tensor-autograd", "unbroadcast")
def unbroadcast(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum `grad`, the gradient of a broadcast result, back down to an input's `shape`.

    Broadcasting reads one input element at many output positions, so its gradient is the sum of theirs:
    sum over the leading dims the input did not have, and over dims where the input had size 1 (keeping
    them as size 1). `shape` must broadcast to grad's shape. Returns grad itself when the shapes already match
    (no copy); a `grad` with fewer dims than `shape` -> ValueError.
        unbroadcast(g of shape (4, 2, 3), (2, 1)) == g.sum(axis=(0, 2), keepdim=True).reshape(2, 1)
    """
    if grad.shape == shape:
        return grad
    lead = grad.ndim - len(shape)
    if lead < 0:
        raise ValueError(f"unbroadcast: gradient of shape {grad.shape} has fewer dims than shape {shape}")
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and grad.shape[lead + d] != 1)
    return grad.sum(axes, keepdim=True).reshape(shape)


def index_tensor(index: Tensor | Sequence[int], op: str, device: str = "cpu") -> Tensor:
    if not isinstance(index, Tensor):
        index = Tensor(index, dtype=int64, device=device)
    if index.dtype != int64:
        raise TypeError(f"{op}: index must have dtype int64, got {index.dtype}")
    return contiguous(index)


def gather(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """out[..., k, ...] = x[..., index[..., k, ...], ...] along `axis`; index.shape equals x.shape except
    along `axis`, and out has index's shape."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.gather(x, axis, index)
    axis = normalize_axis(axis, x.ndim, "gather")
    index = index_tensor(index, "gather", x.device)
    device = devices.same("gather", x, index)
    if index.ndim != x.ndim or any(i != s for d, (i, s) in enumerate(zip(index.shape, x.shape)) if d != axis):
        raise ValueError(f"gather: index shape {index.shape} must match input shape {x.shape} except on axis {axis}")
    x_in, x = x, contiguous(x)
    out = new(index.shape, x.dtype, device)
    if out.size:
        if x.shape[axis] == 0:
            raise IndexError(f"gather: axis {axis} of shape {x.shape} is empty")
        outer, inner = prod(x.shape[:axis]), prod(x.shape[axis + 1:])
        on(device)["gather"](x._buf[x.offset:], index._buf[index.offset:], out._buf,
                          outer, x.shape[axis], index.shape[axis], inner)
    if x_in._requires_grad:
        autograd.record("gather", out, (x_in,), shape=x.shape, axis=axis, index=index)
    return out


_COMPILED: dict[str, object] = {}  # the kernels of the pieces below, compiled on their first call


@exercise("06-tensor-autograd", "kernel_launchers")
def scatter_add(g: Tensor, shape: tuple[int, ...], axis: int, index: Tensor) -> Tensor:
    """Backward of `gather(x, axis, index)` (and of max over axes): a new tensor of `shape` (x's) and g's dtype,
    zero except that out[..., index[..., k, ...], ...] += g[..., k, ...] along `axis`, for every position of g.
    `g` (a Tensor in any layout) and `index` (an int64 Tensor, contiguous) have one shape, which is `shape` except
    along `axis`; `axis` may be negative. An entry outside [-shape[axis], shape[axis]) makes this call raise
    IndexError (negative counts from the end). A position read n times gets the sum of its n gradients; one never
    read stays zero. Its loop is a numba kernel on flat numpy arrays: g and index as (outer, g.shape[axis], inner)
    blocks around `axis`, out as (outer, shape[axis], inner), row-major."""
    if g.device != "cpu":  # (the book's piece also serves max's rule on the GPU: that device's kernel)
        return scatter_on_device("scatter_add", g, shape, axis, index)
    axis = normalize_axis(axis, len(shape), "scatter_add")
    g = contiguous(g)
    out = zeros(shape, dtype=g.dtype)
    if not g.size:
        return out
    run = _COMPILED.get("scatter_add")
    if run is None:  # the kernel is defined here, so nothing else in the package computes this piece
        @kernel
        def scatter_add_kernel(g, idx, out, outer, n_src, n_idx, inner):
            for o in range(outer):
                for k in range(n_idx):
                    row = (o * n_idx + k) * inner
                    for i in range(inner):
                        dst = checked_index(idx[row + i], n_src)
                        out[u((o * n_src + dst) * inner + i)] += g[u(row + i)]
        run = _COMPILED["scatter_add"] = scatter_add_kernel
    run(g._buf[g.offset:], index._buf[index.offset:], out._buf, prod(shape[:axis]), shape[axis], g.shape[axis],
        prod(shape[axis + 1:]))
    return out


def scatter_on_device(kernel: str, g: Tensor, shape: tuple[int, ...], axis: int, index: Tensor) -> Tensor:
    """The backward of gather (`kernel` "scatter_add") or of index_select ("index_add") on a device other than the
    CPU: the pieces' work, with the device's kernel of that name (the pieces define theirs inside them, for the
    CPU). The kernels take the CPU pieces' arguments: (g, index, out, outer, n_src[, n_idx], inner), flat."""
    axis = normalize_axis(axis, len(shape), kernel)
    g = contiguous(g)
    out = zeros(shape, dtype=g.dtype, device=g.device)
    if g.size:
        sizes = (shape[axis], g.shape[axis]) if kernel == "scatter_add" else (shape[axis],)
        on(g.device)[kernel](g._buf[g.offset:g.offset + g.size], index._buf[index.offset:index.offset + index.size],
                             out._buf, prod(shape[:axis]), *sizes, prod(shape[axis + 1:]))
    return out


def _gather_rule(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """gather's rule: `scatter_add`, or inside tg.compile's trace its lazy twin (a learner's scatter_add runs a
    kernel, which lazy tensors can't feed); on the GPU, the GPU's scatter_add kernel."""
    if g.device != "cpu":
        return (scatter_on_device("scatter_add", g, ctx.shape, ctx.axis, ctx.index),)
    scatter = tracing.hooks.scatter_add if tracing.active else scatter_add
    return (scatter(g, ctx.shape, ctx.axis, ctx.index),)


def index_select(x: Tensor, axis: int, index: Tensor | Sequence[int]) -> Tensor:
    """Pick whole slices along `axis`: out shape = x.shape[:axis] + index.shape + x.shape[axis+1:]."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.index_select(x, axis, index)
    axis = normalize_axis(axis, x.ndim, "index_select")
    index = index_tensor(index, "index_select", x.device)
    device = devices.same("index_select", x, index)
    x_in, x = x, contiguous(x)
    out = new(x.shape[:axis] + index.shape + x.shape[axis + 1:], x.dtype, device)
    if out.size:
        if x.shape[axis] == 0:
            raise IndexError(f"index_select: axis {axis} of shape {x.shape} is empty")
        outer, inner = prod(x.shape[:axis]), prod(x.shape[axis + 1:])
        on(device)["index_select"](x._buf[x.offset:], index._buf[index.offset:index.offset + index.size], out._buf,
                                outer, x.shape[axis], inner)
    if x_in._requires_grad:
        autograd.record("index_select", out, (x_in,), shape=x.shape, axis=axis, index=index)
    return out


@exercise("08-language-models", "index_add")
def index_add(g: Tensor, shape: tuple[int, ...], axis: int, index: Tensor) -> Tensor:
    """Backward of `index_select(x, axis, index)` (the embedding's gradient): a new tensor of `shape` (x's) and
    g's dtype, zero except that slice `index[k]` along `axis` collects slice k of `g` along that axis, for every
    k. `g` has shape shape[:axis] + index.shape + shape[axis+1:]; `index` is contiguous int64, any shape (read
    flat), entries in [-shape[axis], shape[axis]) (negative counts from the end). An id read n times gets the
    sum of its n gradients; a slice never read stays zero."""
    g = contiguous(g)
    out = zeros(shape, dtype=g.dtype)
    if not g.size:
        return out
    run = _COMPILED.get("index_add")
    if run is None:  # the kernel is defined here, so nothing else in the package computes this piece
        @kernel
        def index_add_kernel(g, idx, out, outer, n_src, inner):
            n_idx = idx.shape[0]
            for o in range(outer):
                for k in range(n_idx):
                    dst = (o * n_src + checked_index(idx[k], n_src)) * inner
                    src = (o * n_idx + k) * inner
                    for i in range(inner):
                        out[u(dst + i)] += g[u(src + i)]
        run = _COMPILED["index_add"] = index_add_kernel
    run(g._buf[g.offset:], index._buf[index.offset:index.offset + index.size], out._buf,
        prod(shape[:axis]), shape[axis], prod(shape[axis + 1:]))
    return out


def _index_select_rule(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """index_select's rule: `index_add` (exercise 8's piece, for the CPU), or the GPU's index_add kernel."""
    if g.device != "cpu":
        return (scatter_on_device("index_add", g, ctx.shape, ctx.axis, ctx.index),)
    return (index_add(g, ctx.shape, ctx.axis, ctx.index),)


def to_device(x: Tensor, device: str) -> Tensor:
    """x's elements on `device`, contiguous (x itself when it is there already); recorded, so the gradient goes
    back to x's device."""
    if x.device == device:
        return x
    if tracing.active:
        raise RuntimeError("to: moving a tensor between devices inside teenygrad.compile is not supported")
    xc = contiguous(detached(x))
    flat = devices.to_host(xc._buf[xc.offset:xc.offset + xc.size])  # through the computer's memory
    out = Tensor._contiguous(devices.from_host(flat, device), x.shape)
    if x._requires_grad:
        autograd.record("to_device", out, (x,), device=x.device)
    return out


def check_cat(tensors: Sequence[Tensor], axis: int) -> tuple[list[Tensor], int, object]:
    """cat's arguments checked (the eager op and the compiler's trace share it): the tensors as a list, the axis
    made non-negative, and the result's dtype."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: need at least one tensor")
    first = tensors[0]
    axis = normalize_axis(axis, first.ndim, "cat")
    dtype = first.dtype
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(s != f for d, (s, f) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ValueError(f"cat: shapes {first.shape} and {t.shape} differ outside axis {axis}")
        dtype = result_dtype(dtype, t.dtype)
    return tensors, axis, dtype


def cat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along an existing axis; all other sizes must agree."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return tracing.hooks.cat(tensors, axis)
    tensors, axis, dtype = check_cat(tensors, axis)
    shape = list(tensors[0].shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    out = new(tuple(shape), dtype, devices.same("cat", *tensors))
    start, spans = 0, []
    for t in tensors:
        size = t.shape[axis]
        copy_into(t, out._narrow(axis, start, size))  # write into a view of the output slab
        spans.append((start, size))
        start += size
    if any(t._requires_grad for t in tensors):
        autograd.record("cat", out, tuple(tensors), axis=axis, spans=spans)
    return out


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join same-shaped tensors along a new axis."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: need at least one tensor")
    for t in tensors[1:]:
        if t.shape != tensors[0].shape:
            raise ValueError(f"stack: shapes {tensors[0].shape} and {t.shape} differ")
    axis = normalize_axis(axis, tensors[0].ndim + 1, "stack")
    return cat([t.unsqueeze(axis) for t in tensors], axis)  # autograd: unsqueeze, then cat, each with its rule


# ---- the rules of the views and of cat (exercise 6, part "movement_rules") ----------------------------------------

@exercise("06-tensor-autograd", "movement_rules")
def reshape_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = x.reshape(...) (also view, squeeze, unsqueeze, flatten): the same elements in the same row-major order,
    so dx is g in x's shape, ctx.shape."""
    return (g.reshape(ctx.shape),)


@exercise("06-tensor-autograd", "movement_rules")
def permute_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = x.permute(*ctx.dims) (also transpose, .T): out's axis i is x's axis ctx.dims[i]; dx is g with the axis
    order undone (the inverse permutation), of x's shape."""
    inverse = [0] * len(ctx.dims)
    for i, d in enumerate(ctx.dims):
        inverse[d] = i
    return (g.permute(*inverse),)


@exercise("06-tensor-autograd", "movement_rules")
def expand_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = x.expand(...): each element of x (shape ctx.shape) is read at many positions of out (stride 0), so dx
    is g summed back to x's shape, as for broadcasting."""
    return (unbroadcast(g, ctx.shape),)


@exercise("06-tensor-autograd", "movement_rules")
def index_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor]:
    """out = x[key] with a basic key (ints, slices, None, ...): a view that reads each element at most once. dx is a
    new tensor of x's shape (ctx.shape) and g's dtype: g where the view read, 0 everywhere else, written into that
    new tensor only (never into g, x or x.grad: the engine adds dx into .grad). ctx.key is the key as the forward
    received it (index a tensor with it to get the same view)."""
    if tracing.active:  # inside teenygrad.compile's trace: a graph node, not a kernel
        return (tracing.hooks.into_zeros(g, ctx.shape, ctx.key),)
    dx = zeros(ctx.shape, dtype=g.dtype, device=g.device)
    copy_into(g, basic_index(dx, ctx.key))  # not dx[key] = g: a fresh buffer needs no version count
    return (dx,)


@exercise("06-tensor-autograd", "movement_rules")
def cat_backward(ctx: autograd.Node, g: Tensor) -> tuple[Tensor, ...]:
    """out = cat(tensors, ctx.axis): input i was copied to positions start <= k < start + size along ctx.axis,
    ctx.spans[i] = (start, size) (size may be 0); its gradient is that slice of g (a view is fine)."""
    return tuple(g._narrow(ctx.axis, start, n) for start, n in ctx.spans)


RULES = {
    # ---- views: move g back through the same index map ------------------------------------------------
    "reshape": reshape_backward,                               # same elements, old shape (also view, (un)squeeze)
    "permute": permute_backward,                               # undo the axis order (also transpose, .T)
    "expand": expand_backward,                                 # each repeated read adds its gradient
    "index": index_backward,                                   # slices/ints: g where read, 0 elsewhere
    "copy": lambda ctx, g: (g,),                               # contiguous(), clone(): the identity
    "cast": lambda ctx, g: (g.to(ctx.dtype),),                 # float32 <-> float64: back to the input's dtype
    # ---- indexing and joining ------------------------------------------------------------------------------
    "gather": _gather_rule,                                    # scatter_add: repeats add up
    "index_select": _index_select_rule,                        # index_add: the embedding's gradient
    "to_device": lambda ctx, g: (to_device(g, ctx.device),),   # back to the device the input was on
    "cat": cat_backward,                                       # each input its slice of g
}
