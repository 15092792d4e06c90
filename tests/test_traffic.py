"""A GPU kernel's memory traffic is counted by the grader (autograder/traffic.py), outside the learner's process: the
harness runs the part's cells in numba-cuda's simulator and hands the launcher arrays whose elements live in the
grader. Exercise 11's tiled kernel three ways wrong, through the judge's own Traffic (each case starts a harness:
about 4 CPU-s; the solution's full marks, traffic counted, are tested in tests/test_autograder_parts.py)."""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

from autograder import sandbox, traffic
from autograder.judges.gpu_kernels import PARTS

from conftest import REPO

SOLUTIONS = REPO / "solutions" / "11-gpu-kernels.ipynb"
PART = "tiled"

# the solution's kernel with one change each (the launcher is the solution's)
NAIVE = ("        for k0 in range(0, K, tile):", "        for k in range(K if row < M and col < N else 0):\n"
         "            acc += a[row, k] * b[k, col]\n        for k0 in range(0):")
UNGUARDED = ("a[row, k0 + tx] if row < M and k0 + tx < K else np.float32(0.0)", "a[row, k0 + tx]")
READS_OUT = ("            out[row, col] = acc", "            out[row, col] = out[row, col] * 0 + acc")


def notebook(change: tuple[str, str] | None = None) -> nbformat.NotebookNode:
    nb = nbformat.read(SOLUTIONS, as_version=4)
    for cell in nb.cells:
        if change and cell.metadata.get("nbgrader", {}).get("grade_id") == PART:
            assert change[0] in cell.source
            cell.source = cell.source.replace(*change)
    return nb


def box(tmp_path: Path) -> sandbox.Box:
    """A sandbox for the harness without the root-only isolation (as a learner's `check` on a laptop), with the
    environment every grader's sandbox gets: the simulator on."""
    (tmp_path / "work").mkdir()
    return sandbox.Box(tmp_path, {"id": f"test-traffic-{os.getpid()}", "uid": os.getuid(), "isolate": False,
                       "work_dir": str(tmp_path / "work"), "home": str(tmp_path / "work"), "read_only": [],
                       "env": {"PYTHONPATH": str(REPO), **sandbox.SIMULATED_GPU},
                       "wall_seconds": 300, "address_space_bytes": 8 * 2**30, "memory_bytes": 8 * 2**30,
                       "max_processes": 64, "file_bytes": 2**30, "status_file": str(tmp_path / "status.json")})


@pytest.mark.parametrize("change, said", [
    (NAIVE, "a[0, 0] was loaded 6 times; the contract says ceil(N / tile) = ceil(6 / 4) = 2"),
    (UNGUARDED, "of array 0 is outside its shape (7, 5): a thread read or wrote past the edge"),
    (READS_OUT, "out[0, 0] was read 1 times; the contract says 0"),
], ids=["naive", "unguarded", "reads-out"])
def test_the_grader_counts_the_tiled_kernels_loads(tmp_path, change, said):
    verdict = traffic.judge_traffic(notebook(change), PART, PARTS[PART].traffic, box(tmp_path), seed=1)
    assert verdict.startswith("counted by the grader, sgemm_shared(7x5, 5x6, 7x6, 4): ") and said in verdict, verdict
