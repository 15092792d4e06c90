"""How long does a new Python process take to `import teenygrad` and run its first ops, once the kernels
are cached on disk? `python benchmarks/startup.py` (target: import under a second)."""
from __future__ import annotations

import statistics
import subprocess
import sys

SCRIPT = """
import time
t0 = time.perf_counter()
import teenygrad as tg
t1 = time.perf_counter()
x = tg.randn(64, 64)
((x @ x).relu().softmax(-1).sum()).item()
t2 = time.perf_counter()
import numpy
t3 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def main() -> None:
    subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True)  # fill the cache
    runs = [tuple(map(float, subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True,
                                            text=True).stdout.split())) for _ in range(5)]
    imports, firsts = zip(*runs)
    print(f"import teenygrad: median {statistics.median(imports):.3f} s over 5 new processes")
    print(f"first ops (matmul, relu, softmax, sum) from the disk cache: median {statistics.median(firsts):.3f} s")


if __name__ == "__main__":
    main()
