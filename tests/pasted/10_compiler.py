"""Exercise 10 answered with teenygrad's own pieces (each must score 0: see issue 12)."""
ANSWERS = {
    "index_expr": "from teenygrad.compiler.codegen import index_expr\n",
    "cse": (
        "def eliminate_common(graph):\n"
        "    return passes.eliminate_common(graph)\n"),
    "fold_constants": "fold_constants = passes.fold_constants\n",
}
