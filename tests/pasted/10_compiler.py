"""Exercise 10 answered with teenygrad's own pieces (each must score 0: see issue 12)."""
ANSWERS = {
    "index_expr": "from teenygrad.compiler.codegen import index_expr\n",
    "fold_constants": "fold_constants = passes.fold_constants\n",
    "merge_cats": (
        "def merge_cats(graph):\n"
        "    return passes.merge_cats(graph)\n"),
    "transpose_products": "from teenygrad.compiler.passes import transpose_products\n",
    "emit": (
        "from teenygrad.compiler.codegen.expr import Expr as _Theirs\n\n\n"
        "def emit(self, n):\n"
        "    return _Theirs.emit(self, n)\n"),
    "fusion": (
        "from teenygrad.compiler.schedule import fusion as _theirs\n\n\n"
        "def is_row_view(v, shape, inner):\n"
        "    return _theirs.is_row_view(v, shape, inner)\n\n\n"
        "def aligned(k, it, reads, members):\n"
        "    return _theirs.aligned(k, it, reads, members)\n\n\n"
        "def can_join(k, it):\n"
        "    return _theirs.can_join(k, it)\n\n\n"
        "def can_follow(k, it, targets):\n"
        "    return _theirs.can_follow(k, it, targets)\n"),
    "columns": (
        "from teenygrad.compiler.codegen import kernels as _kernels\n\n\n"
        "def column_kernel(name, kern, sched, src):\n"
        "    return _kernels.column_kernel(name, kern, sched, src)\n\n\n"
        "def combine_kernel(name, kern, sched, src, stage=-1):\n"
        "    return _kernels.combine_kernel(name, kern, sched, src, stage)\n"),
}
