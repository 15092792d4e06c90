"""Exercise 8 answered with teenygrad's own pieces (each must score 0: see issue 12)."""
ANSWERS = {
    "index_add": (
        "from teenygrad.ops import RULES\n\n\n"
        "def index_add(g, shape, axis, index):\n"
        "    class Ctx:\n"
        "        pass\n"
        "    ctx = Ctx()\n"
        "    ctx.shape, ctx.axis, ctx.index = shape, axis, index\n"
        "    return RULES['index_select'](ctx, g)[0]\n"),
    "top_k_logits": "from teenygrad.text import top_k_logits\n",
    "top_p_logits": (
        "def top_p_logits(logits, top_p):\n"
        "    return text.top_p_logits(logits, top_p)\n"),
}
