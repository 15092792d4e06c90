"""Neural-network building blocks (chapter 7; `from teenygrad import nn`), shaped like PyTorch's `torch.nn`.

A `Module` is a Python object whose attributes hold its parameters (leaf Tensors with requires_grad=True)
and its sub-modules. Nothing is registered by hand: `parameters()` walks the attributes, in the order
they were set, into sub-modules and into lists of modules, and names each parameter by its path
(`blocks.0.attn.weight`). A tensor reached twice (weight tying) is listed once, so an optimizer
updates it once.

    class MLP(nn.Module):
        def __init__(self):
            self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)
        def forward(self, x):
            return self.fc2(self.fc1(x).relu())

The layers do no math of their own: each calls one function of `teenygrad.functional`, where the
arithmetic (and later its fused kernels) lives. Initialisers are in `nn.init` (`teenygrad/nn_init.py`).
Saving is numpy's `.npz`: one array per parameter name (numpy is I/O here, never the engine).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from teenygrad import devices
from teenygrad import functional as F
from teenygrad import nn_init as init
from teenygrad.edition import exercise
from teenygrad.kernels.layout import contiguous_strides
from teenygrad.tensor import Tensor, as_dtype, float32, zeros

__all__ = ["Module", "ModuleList", "Sequential", "Linear", "Embedding", "LayerNorm", "RMSNorm", "Dropout",
           "ReLU", "Tanh", "GELU", "Sigmoid", "parameter", "init"]


def parameter(*shape: int, dtype: object = float32) -> Tensor:
    """A new leaf tensor of zeros that requires grad (fill it with an `nn.init` function)."""
    return zeros(shape, dtype=dtype).requires_grad_()


class Module:
    """Base class: subclass it, set parameters and sub-modules as attributes in __init__, write forward()."""

    training: bool = True  # a class default: subclasses need not call super().__init__()

    def __init__(self) -> None:
        pass

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ---- discovery ----------------------------------------------------------------------------------------
    def _items(self) -> Iterator[tuple[str, object]]:
        """(name, value) of the attributes, in the order they were set; a list or tuple attribute
        `blocks` contributes its elements as `blocks.0`, `blocks.1`, ..."""
        for name, value in vars(self).items():
            if isinstance(value, (list, tuple)):
                for i, v in enumerate(value):
                    yield f"{name}.{i}", v
            else:
                yield name, value

    def named_children(self) -> Iterator[tuple[str, Module]]:
        for name, value in self._items():
            if isinstance(value, Module):
                yield name, value

    def children(self) -> list[Module]:
        return [m for _, m in self.named_children()]

    @exercise("07-neural-nets", "modules")
    def named_modules(self, prefix: str = "") -> list[tuple[str, Module]]:
        """This module and every module below it, depth first, each once (the first name found)."""
        out, seen, stack = [], set(), [(prefix, self)]
        while stack:
            name, mod = stack.pop()
            if id(mod) in seen:
                continue  # a shared module (or a cycle) is visited once
            seen.add(id(mod))
            out.append((name, mod))
            kids = [(f"{name}.{n}" if name else n, m) for n, m in mod.named_children()]
            stack.extend(reversed(kids))  # reversed: pop them in attribute order
        return out

    def modules(self) -> list[Module]:
        return [m for _, m in self.named_modules()]

    @exercise("07-neural-nets", "modules")
    def named_parameters(self) -> list[tuple[str, Tensor]]:
        """(dotted name, tensor) for every parameter: a leaf Tensor attribute with requires_grad=True.
        Tensors computed in forward and kept on the module (activations) are not leaves, so not listed."""
        out, seen = [], set()
        for prefix, mod in self.named_modules():
            for name, value in mod._items():
                if isinstance(value, Tensor) and value.requires_grad and value.is_leaf and id(value) not in seen:
                    seen.add(id(value))
                    out.append((f"{prefix}.{name}" if prefix else name, value))
        return out

    def parameters(self) -> list[Tensor]:
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        return sum(p.size for p in self.parameters())

    # ---- modes and gradients --------------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set `.training` on this module and all below it (Dropout reads it); returns self."""
        for m in self.modules():
            m.training = bool(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def zero_grad(self) -> None:
        """Forget every parameter's gradient (.grad = None): backward *adds* into .grad, so without this
        each step would use the sum of all gradients so far."""
        for p in self.parameters():
            p.grad = None

    def to(self, dtype: object) -> Module:
        """Convert every parameter to `dtype`, or move it to a device (`model.to("cuda")`), in place: the same Tensor
        objects, so an optimizer keeps them (and moves its state after them at its next step). Gradients are
        dropped."""
        if isinstance(dtype, str) and dtype.split(":")[0] in devices.DEVICES:
            device = devices.check(dtype)
            for p in self.parameters():
                if p.device != device:
                    values = devices.to_host(p._buf[p.offset:p.offset + p.size])  # parameters are contiguous
                    p._buf, p.offset, p.grad = devices.from_host(values, device), 0, None
            return self
        dt = as_dtype(dtype)
        for p in self.parameters():
            if p.dtype != dt:
                p._buf = devices.from_host(p.numpy().astype(dt).reshape(-1), p.device)  # a new buffer, new dtype
                p.strides, p.offset, p.grad = contiguous_strides(p.shape), 0, None
        return self

    # ---- saving and loading ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """{parameter name: a numpy copy of its values}."""
        return {name: p.numpy().copy() for name, p in self.named_parameters()}

    @exercise("07-neural-nets", "modules")
    def load_state_dict(self, state: dict[str, np.ndarray]) -> Module:
        """Copy values (numpy arrays, as state_dict() and np.load give them) into the parameters of the same names,
        in place, cast to each parameter's dtype. Every name must match both ways (else KeyError) and every shape
        exactly (else ValueError); otherwise nothing is changed and the error lists what is wrong."""
        params = dict(self.named_parameters())
        missing, unexpected = sorted(set(params) - set(state)), sorted(set(state) - set(params))
        if missing or unexpected:
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        wrong = [f"{k}: saved {np.shape(state[k])}, model {params[k].shape}" for k in params
                 if tuple(np.shape(state[k])) != params[k].shape]
        if wrong:
            raise ValueError("load_state_dict: shape mismatch: " + "; ".join(wrong))
        for name, p in params.items():
            value = np.asarray(state[name], dtype=p.dtype)
            if p.device == "cpu":
                p.numpy()[...] = value  # I/O into the parameter's buffer
            else:  # numpy() of a GPU tensor is a copy: write into the device's buffer
                p._buf[p.offset:p.offset + p.size].copy_to_device(np.ascontiguousarray(value).reshape(-1))
        return self

    def save(self, path: str | Path) -> None:
        """Write the state_dict to one .npz file (numpy adds the .npz suffix when missing)."""
        np.savez(path, **self.state_dict())

    def load(self, path: str | Path) -> Module:
        """Load parameters saved by save(); returns self."""
        with np.load(path, allow_pickle=False) as z:
            return self.load_state_dict({k: z[k] for k in z.files})

    # ---- printing ---------------------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        kids = [f"  ({name}): " + repr(m).replace("\n", "\n  ") for name, m in self.named_children()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(kids) + "\n)" if kids else ")")


class ModuleList(Module):
    """A list of modules whose parameters are found (named `0`, `1`, ...); index, iterate, append."""

    def __init__(self, modules: Iterable[Module] = ()) -> None:
        self._list: list[Module] = list(modules)

    def _items(self) -> Iterator[tuple[str, object]]:
        return ((str(i), m) for i, m in enumerate(self._list))

    def __getitem__(self, i: int | slice) -> Module:
        return ModuleList(self._list[i]) if isinstance(i, slice) else self._list[i]

    def __len__(self) -> int:
        return len(self._list)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._list)

    def append(self, module: Module) -> ModuleList:
        self._list.append(module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        self._list.extend(modules)
        return self


class Sequential(ModuleList):
    """Modules applied one after another: Sequential(a, b, c)(x) = c(b(a(x)))."""

    def __init__(self, *modules: Module) -> None:
        super().__init__(modules)

    def __getitem__(self, i: int | slice) -> Module:
        return Sequential(*self._list[i]) if isinstance(i, slice) else self._list[i]

    def forward(self, x: Tensor) -> Tensor:
        for m in self._list:
            x = m(x)
        return x


# ---- layers ---------------------------------------------------------------------------------------------------

def _sizes(layer: str, **sizes: int) -> None:
    """Every size a positive int, else ValueError naming the layer and the size."""
    for name, n in sizes.items():
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"{layer}: {name} must be a positive int, got {n!r}")


class Linear(Module):
    """y = x W^T + b with W of shape (out_features, in_features), as in PyTorch.

    W and b start uniform(-1/sqrt(in), 1/sqrt(in)): each output is a sum of `in` terms, so this keeps
    its variance about Var(x)/3 whatever the width."""

    @exercise("07-neural-nets", "linear")
    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: object = float32) -> None:
        """Keep the sizes (`in_features`, `out_features`); parameters of `dtype` drawn from teenygrad's generator,
        `weight` (out_features, in_features) first, then `bias` (out_features,) or None, both uniform(-1/sqrt(in),
        1/sqrt(in)). A size that is not a positive int: ValueError."""
        _sizes("Linear", in_features=in_features, out_features=out_features)
        self.in_features, self.out_features = int(in_features), int(out_features)
        bound = 1.0 / math.sqrt(in_features)
        self.weight = init.uniform_(parameter(out_features, in_features, dtype=dtype), -bound, bound)
        self.bias = init.uniform_(parameter(out_features, dtype=dtype), -bound, bound) if bias else None

    @exercise("07-neural-nets", "linear")
    def forward(self, x: Tensor) -> Tensor:
        """x (..., in_features) -> x W^T + b (..., out_features): one op, F.linear, with one backward rule."""
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A lookup table: row i of `weight` (num_embeddings, embedding_dim) for index i; starts normal(0, 1)."""

    @exercise("07-neural-nets", "embedding")
    def __init__(self, num_embeddings: int, embedding_dim: int, dtype: object = float32) -> None:
        """Keep the sizes; the parameter `weight` (num_embeddings, embedding_dim) of `dtype`, drawn normal(0, 1) from
        teenygrad's generator. A size that is not a positive int: ValueError."""
        _sizes("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.weight = init.normal_(parameter(num_embeddings, embedding_dim, dtype=dtype))

    @exercise("07-neural-nets", "embedding")
    def forward(self, index: Tensor) -> Tensor:
        """Integer ids of any shape -> their rows, (*index.shape, embedding_dim), through F.embedding (the gradient
        of a row used twice is the sum of both)."""
        return F.embedding(index, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim; weight starts at 1, bias at 0."""

    @exercise("07-neural-nets", "layer_norm")
    def __init__(self, dim: int, eps: float = 1e-5, bias: bool = True, dtype: object = float32) -> None:
        """Keep `dim` and `eps`; the parameters `weight` (dim,) of ones (init.ones_) and `bias` (dim,) of zeros (or
        None), of `dtype`. dim not a positive int, or eps not > 0: ValueError."""
        _sizes("LayerNorm", dim=dim)
        if not eps > 0:
            raise ValueError(f"LayerNorm: eps must be > 0, got {eps}")
        self.dim, self.eps = int(dim), float(eps)
        self.weight = init.ones_(parameter(dim, dtype=dtype))
        self.bias = parameter(dim, dtype=dtype) if bias else None

    @exercise("07-neural-nets", "layer_norm")
    def forward(self, x: Tensor) -> Tensor:
        """Normalise x's last dim (of size dim) through F.layer_norm."""
        return F.layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dim (no centring, no bias); weight starts at 1."""

    @exercise("07-neural-nets", "rms_norm")
    def __init__(self, dim: int, eps: float = 1e-5, dtype: object = float32) -> None:
        """Keep `dim` and `eps`; the parameter `weight` (dim,) of ones (init.ones_), of `dtype`. dim not a positive
        int, or eps not > 0: ValueError."""
        _sizes("RMSNorm", dim=dim)
        if not eps > 0:
            raise ValueError(f"RMSNorm: eps must be > 0, got {eps}")
        self.dim, self.eps = int(dim), float(eps)
        self.weight = init.ones_(parameter(dim, dtype=dtype))

    @exercise("07-neural-nets", "rms_norm")
    def forward(self, x: Tensor) -> Tensor:
        """Normalise x's last dim (of size dim) through F.rms_norm."""
        return F.rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps}"


class Dropout(Module):
    """In training, zero each element with probability p and scale the rest by 1/(1-p); in eval, the identity."""

    @exercise("07-neural-nets", "dropout")
    def __init__(self, p: float = 0.5) -> None:
        """Keep p, a float in [0, 1), else ValueError."""
        if not 0 <= p < 1:
            raise ValueError(f"Dropout: p must be in [0, 1), got {p}")
        self.p = float(p)

    @exercise("07-neural-nets", "dropout")
    def forward(self, x: Tensor) -> Tensor:
        """F.dropout of x with this module's p, in training mode when self.training."""
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class ReLU(Module):
    """max(x, 0)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class GELU(Module):
    """GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x)  # one fused kernel each way in float32
