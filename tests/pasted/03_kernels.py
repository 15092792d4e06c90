"""Exercise 3 answered with teenygrad's own pieces: every part must score 0 (the pieces are withheld)."""
ANSWERS = {
    "binary": "sub, mul, div, pow, maximum = (tg.kernels.KERNELS[name] for name in ('sub', 'mul', 'div', 'pow', 'maximum'))\n"
              "from teenygrad.kernels.elementwise import compare\n",
    "sum_rows": "sum_rows = tg.kernels.KERNELS['sum']\n",
    "max_rows": "max_rows, argmax_rows = tg.kernels.KERNELS['max'], tg.kernels.KERNELS['argmax']\n",
    "matmul_blocked": "from teenygrad.kernels.matmul import KERNELS as _MM\n\n\n"
                      "def matmul_blocked(a, b, out, block_i=32, block_k=128, block_j=1024):\n"
                      "    _MM['blocked'](a, b, out, block_i, block_k, block_j)\n",
    "matmul_tile": "def matmul_tile(a, b, out, i0, i1, k0, k1, j0, j1):\n"
                   "    blocked.matmul_tile(a, b, out, i0, i1, k0, k1, j0, j1)\n",
}
