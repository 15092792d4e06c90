"""Exercise 11 answered with teenygrad's own pieces: every part must score 0 (the pieces are withheld, and the
package's other matmul, its best rung, loads each element fewer times than the judge's tile needs)."""
ANSWERS = {
    "tiled": "def sgemm_shared(a, b, out, tile=32):\n"
             "    M, N = out.shape\n"
             "    matmul.shared_kernel(tile)[((N + tile - 1) // tile, (M + tile - 1) // tile), (tile, tile)](a, b, out)\n",
    "softmax": "def softmax_rows(x, out, threads=256):\n"
               "    reduce.softmax_rows_kernel[x.shape[0], threads](x, out)\n",
    "launch": "def launch_config(shape, threads=256):\n"
              "    return tg.kernels.cuda.launch.launch_config(shape, threads)\n",
}
