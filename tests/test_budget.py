"""Readers read teenygrad's source, so it has a size budget, as tinygrad does: no module past what a
learner reads in one sitting, and the whole package stays small. Raise a number only on purpose."""
from __future__ import annotations

from conftest import REPO

MAX_MODULE_LINES = 460
MAX_PACKAGE_LINES = 11610  # raised for chapters 7-9 (nn, optim, the GPT, its fused kernels) and 10 (the compiler: ~2,400,
# then +25 for fusing one parameter's Adam update into one kernel, and reading moments where their assigns wrote them,
# +75 for one cat from a sliced tensor's padded gradients and products written in the layout their copy wanted,
# +125 for triangles.py: the compiler proves which products may skip a causal mask's zeros, as chapter 9 does by hand,
# +25 for a row buffer that keeps softmax's e^(x - max) from the sum's pass for the last one,
# +25 for a schedule order that computes each weight's gradient while the dy it reads is still in cache,
# +50 for transpose_products: attention's dk = dS^T q, written as its reader wants and skipping dS's zeros,
# +25 for causal rows, column blocks, a cap on side-by-side stages and Program.run_flat,
# +70 for the micro-kernel's accumulators touched only as whole vectors (vector_fma, vector_store_at): a tile's fixed
# cost went from ~40 ns to a few, depth-32 tiles 27% faster; +15 for kernel caches stamped with all kernels' source,
# +10 for a schedule order that takes short side branches (dW, a bias's sum) before the chain: the GPT step 1.3% faster,
# +100 for sums down columns sharing a loop over rows (a layer norm's dx, dw and db in one pass; a bias's gradient in
# its dy's loop or matmul epilogue: the step 1.7% faster),
# +40 for codegen.py split in two (a loop kernel; the other kernels and the module), each under the module cap)


def modules():
    return sorted((REPO / "teenygrad").rglob("*.py"))


def test_every_module_reads_in_one_sitting():
    long = {p.relative_to(REPO).as_posix(): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"over {MAX_MODULE_LINES} lines: {long}; split the module by idea"


def test_the_package_stays_small():
    total = sum(len(p.read_text().splitlines()) for p in modules())
    assert total <= MAX_PACKAGE_LINES, f"teenygrad is {total} lines, budget {MAX_PACKAGE_LINES}"
