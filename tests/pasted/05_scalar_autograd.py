"""Exercise 5 answered with teenygrad's own pieces (imported, captured from RULES, called): every part must score 0."""
ANSWERS = {
    "sigmoid": (
        "from teenygrad.value import RULES\n\n"
        "_book = RULES['sigmoid']\n\n\n"
        "def sigmoid(a):\n"
        "    return _book(a)\n"),
    "div_and_maximum": "from teenygrad.value import div, maximum\n",
    "find_chains": (
        "from teenygrad import tape_fuse\n\n\n"
        "def find_chains(opcode, a, b, n_leaves):\n"
        "    return tape_fuse.find_chains(opcode, a, b, n_leaves)\n"),
}
