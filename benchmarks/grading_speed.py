"""How fast does the autograder grade? `python benchmarks/grading_speed.py [--n 8] [--assignment 01-regression]`
(`--quick`: one learner's `check`, once, against the 20 s target; no class batches)

Grades N copies of a solved exercise as N learners of a class, once with 1 job and once with 2 jobs, and
prints seconds per notebook (wall time of the whole batch / N, start-up included), notebooks per minute,
and the time a class of 100 would take. Every notebook runs in the sandbox like a real submission.
Targets (issue): median under 20 s per notebook, a class of 100 in under 15 minutes on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from autograder import course  # noqa: E402

TARGET = 20.0  # seconds per notebook (the target)


def solved(assignment: str) -> bytes:
    """The exercise with every solution filled in, as a learner would hand it in."""
    answers = {}
    for cell in nbformat.read(course.SOLUTIONS / f"{assignment}.ipynb", as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution"):
            answers[meta["grade_id"]] = "\n".join(line for line in cell.source.splitlines() if "### " not in line)
    nb = nbformat.read(course.EXERCISES / f"{assignment}.ipynb", as_version=4)
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    return nbformat.writes(nb).encode()


def run(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "autograder", *args], cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stdout + proc.stderr)
    return proc.stdout


def batch(assignment: str, n: int, jobs: int) -> tuple[float, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        src, root = Path(tmp) / "in", Path(tmp) / "course"
        data = solved(assignment)
        for i in range(n):
            (src / f"learner{i:03d}").mkdir(parents=True)
            (src / f"learner{i:03d}" / f"{assignment}.ipynb").write_bytes(data)
        run("collect", str(src), "-a", assignment, "--course", str(root))
        run("setup", assignment, "--course", str(root))  # the one-off course setup is not timed
        start = time.perf_counter()
        out = run("grade", assignment, "--course", str(root), "--jobs", str(jobs))
        wall = time.perf_counter() - start
        assert f"graded {n}," in out, out
        kernels = [json.loads(p.read_text())["seconds"] for p in root.glob(f"autograded/*/{assignment}/result.json")]
        return wall, kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8, help="notebooks per batch (default 8)")
    parser.add_argument("--assignment", default="01-regression")
    parser.add_argument("--quick", action="store_true", help="one learner's check, once; no class batches")
    args = parser.parse_args()
    checks = 1 if args.quick else 3
    with tempfile.TemporaryDirectory() as tmp:  # one learner running `check`, process start-up included
        nb = Path(tmp) / f"{args.assignment}.ipynb"
        nb.write_bytes(solved(args.assignment))
        times = []
        for _ in range(checks):
            start = time.perf_counter()
            run("check", str(nb), "--json")
            times.append(time.perf_counter() - start)
        med = statistics.median(times)
        print(f"check of {args.assignment} (one learner, start-up included): median {med:.1f} s of {checks}; "
              f"/ target ({TARGET:.0f} s per notebook): {med / TARGET:.2f}, {'met' if med < TARGET else 'NOT met'}")
    if args.quick:
        return
    print(f"grading {args.n} solved copies of {args.assignment} per batch")
    print(f"{'jobs':>4}  {'s/notebook':>10}  {'notebooks/min':>13}  {'kernel s (median)':>17}  {'class of 100':>12}")
    for jobs in (1, 2):
        wall, kernels = batch(args.assignment, args.n, jobs)
        per = wall / args.n
        print(f"{jobs:>4}  {per:>10.1f}  {60 / per:>13.1f}  {statistics.median(kernels):>17.1f}  "
              f"{100 * per / 60:>10.1f} min")


if __name__ == "__main__":
    main()
