"""How long does a new Python process take to `import teenygrad` and run its first ops, once the kernels
are cached on disk? `python benchmarks/startup.py` (target: import under a second; `--quick`: 2 processes, not 5)."""
from __future__ import annotations

import argparse
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


TARGET = 1.0  # seconds to import teenygrad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 new processes instead of 5")
    n = 2 if ap.parse_args().quick else 5
    subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True)  # fill the cache
    runs = [tuple(map(float, subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True,
                                            text=True).stdout.split())) for _ in range(n)]
    imports, firsts = zip(*runs)
    med = statistics.median(imports)
    print(f"import teenygrad: median {med:.3f} s over {n} new processes; / target ({TARGET:.0f} s): "
          f"{med / TARGET:.2f}, {'met' if med < TARGET else 'NOT met'}")
    print(f"first ops (matmul, relu, softmax, sum) from the disk cache: median {statistics.median(firsts):.3f} s")


if __name__ == "__main__":
    main()
