"""Exercise 6 answered with teenygrad's own rules (captured from RULES, imported, called): every part must score 0."""
ANSWERS = {
    "max_backward": (
        "_book = tg.ops.RULES['max']\n\n\n"
        "def max_backward(ctx, g):\n"
        "    return _book(ctx, g)\n"),
    "pow_backward": "from teenygrad.ops.elementwise import pow_backward\n",
    "maximum_backward": (
        "from teenygrad.ops import DEFAULT_RULES\n\n\n"
        "def maximum_backward(ctx, g):\n"
        "    return DEFAULT_RULES['maximum'](ctx, g)\n"),
    "cat_backward": (
        "from teenygrad.ops import movement\n\n\n"
        "def cat_backward(ctx, g):\n"
        "    return movement.RULES['cat'](ctx, g)\n"),
}
