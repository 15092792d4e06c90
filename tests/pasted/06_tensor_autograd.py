"""Exercise 6 answered with teenygrad's own pieces (captured from the module, the RULES tables, imported): every part
must score 0."""
ANSWERS = {
    "backward": (
        "from teenygrad import autograd\n\n"
        "_book_order, _book_backward = autograd.topological_order, autograd.backward\n\n\n"
        "def topological_order(root):\n"
        "    return _book_order(root)\n\n\n"
        "def backward(root, grad=None):\n"
        "    return _book_backward(root, grad)\n"),
    "unbroadcast": (
        "from teenygrad.ops import movement\n\n\n"
        "def unbroadcast(grad, shape):\n"
        "    return movement.unbroadcast(grad, shape)\n"),
    "reduction_rules": (
        "from teenygrad.ops import DEFAULT_RULES\n\n\n"
        "def sum_backward(ctx, g):\n"
        "    return DEFAULT_RULES['sum'](ctx, g)\n\n\n"
        "def mean_backward(ctx, g):\n"
        "    return DEFAULT_RULES['mean'](ctx, g)\n\n\n"
        "def max_backward(ctx, g):\n"
        "    return DEFAULT_RULES['max'](ctx, g)\n"),
    "movement_rules": (
        "from teenygrad.ops import movement\n\n"
        "_book = dict(movement.RULES)\n\n\n"
        "def reshape_backward(ctx, g):\n"
        "    return _book['reshape'](ctx, g)\n\n\n"
        "def permute_backward(ctx, g):\n"
        "    return _book['permute'](ctx, g)\n\n\n"
        "def expand_backward(ctx, g):\n"
        "    return _book['expand'](ctx, g)\n\n\n"
        "def index_backward(ctx, g):\n"
        "    return _book['index'](ctx, g)\n\n\n"
        "def cat_backward(ctx, g):\n"
        "    return _book['cat'](ctx, g)\n"),
    "elementwise_rules": (
        "from teenygrad.ops.elementwise import (abs_backward, div_backward, maximum_backward, pow_backward,\n"
        "                                       relu_backward, sigmoid_backward, sqrt_backward, tanh_backward)\n"),
    "matmul_rules": (
        "from teenygrad.ops import DEFAULT_RULES\n\n\n"
        "def matmul_backward(ctx, g):\n"
        "    return DEFAULT_RULES['matmul'](ctx, g)\n"),
    "kernel_launchers": (
        "from teenygrad.ops import movement\n"
        "from teenygrad.ops.losses import cross_entropy_grad\n"
        "from teenygrad.ops.reductions import softmax_grad\n\n"
        "_book_scatter = movement.scatter_add\n\n\n"
        "def scatter_add(g, shape, axis, index):\n"
        "    return _book_scatter(g, shape, axis, index)\n"),
}
