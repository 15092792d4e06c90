"""`teenygrad.tune()` keeps freed memory in the process, so a training step's fresh activations reuse the last
step's pages instead of faulting in new ones from the kernel; importing teenygrad alone changes nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SCRIPT = """
import json, resource
import numpy as np
import sys
import teenygrad
if sys.argv[1] == "tune":
    teenygrad.tune()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():  # like a training step: many activations alive at once (80 MiB), then all freed
    arrays = [np.ones(2 << 20, np.uint8) for _ in range(40)]
    del arrays
step()  # warm up: the heap grows to its high-water mark once
before = faults()
for _ in range(10):
    step()
print(json.dumps({"faults": faults() - before}))
"""


def faults(env: dict, tune: bool = True) -> int:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, "tune" if tune else "import"], capture_output=True,
                          text=True, timeout=300, cwd=root, env={**base, **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])["faults"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc settings")
def test_freed_memory_is_reused_without_page_faults():
    kept = faults({})
    # The oracle: the same run with malloc told to give every big block its own fresh pages (tune() then
    # leaves the settings alone, as it does for any user who sets them).
    fresh = faults({"MALLOC_MMAP_THRESHOLD_": str(128 * 1024)})
    assert fresh > 10 * 80 * 256 // 2  # 80 MiB a step of 4 KiB pages, faulted in again every step
    assert kept < fresh // 10
    assert faults({}, tune=False) > fresh // 2  # importing teenygrad without tune() leaves malloc as it was
