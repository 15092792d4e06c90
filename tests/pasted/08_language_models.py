"""Exercise 8 answered with teenygrad's own pieces (each must score 0: see issue 12)."""
ANSWERS = {
    "vocab": (
        "from teenygrad.text import Vocab as _Theirs\n\n\n"
        "def build(cls, texts, boundary=\".\"):\n"
        "    return _Theirs.build(texts, boundary)\n\n\n"
        "def encode(self, s):\n"
        "    return _Theirs.encode(self, s)\n\n\n"
        "def decode(self, ids):\n"
        "    return _Theirs.decode(self, ids)\n"),
    "split": "from teenygrad.text import split\n",
    "windows": (
        "def windows(words, vocab, block_size):\n"
        "    return text.windows(words, vocab, block_size)\n"),
    "bigram": "from teenygrad.text import bigram_counts, bigram_nll, smoothed\n",
    "draw": (
        "from teenygrad.text import draw as _theirs\n\n\n"
        "def draw(logits, u, temperature=1.0, top_k=None, top_p=None):\n"
        "    return _theirs(logits, u, temperature, top_k, top_p)\n"),
    "sample": "from teenygrad.text import sample\n",
    "index_add": (
        "from teenygrad.ops import RULES\n\n\n"
        "def index_add(g, shape, axis, index):\n"
        "    class Ctx:\n"
        "        pass\n"
        "    ctx = Ctx()\n"
        "    ctx.shape, ctx.axis, ctx.index = shape, axis, index\n"
        "    return RULES['index_select'](ctx, g)[0]\n"),
    "mlp": (
        "from teenygrad.text import MLPLanguageModel as _Theirs\n\n\n"
        "def __init__(self, vocab_size, emb_dim, hidden, block_size):\n"
        "    _Theirs.__init__(self, vocab_size, emb_dim, hidden, block_size)\n\n\n"
        "def forward(self, X):\n"
        "    return _Theirs.forward(self, X)\n"),
    "evaluate": (
        "def evaluate(model, X, Y, batch_size=None):\n"
        "    return text.evaluate(model, X, Y, batch_size)\n"),
    "top_k_logits": "from teenygrad.text import top_k_logits\n",
    "top_p_logits": (
        "def top_p_logits(logits, top_p):\n"
        "    return text.top_p_logits(logits, top_p)\n"),
}
