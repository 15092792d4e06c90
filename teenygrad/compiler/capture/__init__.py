"""Capture (chapter 10): a function of Tensors, run once on lazy tensors, becomes a graph of IR nodes.

    lazy.py    `LazyTensor` (a Tensor holding a graph node) and `Trace` (what the graph reads and writes)
    ops.py     the op layer's launchers, lazily: each builds nodes where the eager launcher runs a kernel
    views.py   views, basic indexing and in-place writes, as movement nodes
    nn.py      composite ops written in smaller ops (cross-entropy, layer norm, attention), the optimizers'
               updates as assigns
"""
