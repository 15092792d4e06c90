"""Exercise 5 answered with teenygrad's own pieces (called, captured from RULES): every part must score 0."""
ANSWERS = {
    "backward": (
        "from teenygrad import value\n\n\n"
        "def topological_order(root):\n"
        "    return value.topological_order(root)\n\n\n"
        "def backward(self, order_fn=None):\n"
        "    return value.Value.backward(self, order_fn)\n"),
    "rules": (
        "from teenygrad.value import RULES\n\n"
        "sub, div, power, neg, exp, log, tanh, relu, sigmoid, maximum = (\n"
        "    RULES[k] for k in ('sub', 'div', 'pow', 'neg', 'exp', 'log', 'tanh', 'relu', 'sigmoid', 'max'))\n"),
    "compile": (
        "from teenygrad import tape\n\n\n"
        "def compile(root, inputs=(), params=(), schedule=True):\n"
        "    return tape.compile(root, inputs, params, schedule)\n"),
    "find_chains": (
        "from teenygrad import tape_fuse\n\n\n"
        "def find_chains(opcode, a, b, n_leaves):\n"
        "    return tape_fuse.find_chains(opcode, a, b, n_leaves)\n"),
}
