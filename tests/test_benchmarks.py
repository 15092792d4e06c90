"""Every benchmark script runs in its smallest form (`--quick`; compile.py's is `--smoke`, gpu.py's `--simulate`)
and prints its ratio line: nothing else runs them, and a renamed function or module would otherwise break one unseen. No timing is asserted, only that the figure
is printed. A comparison with something absent (PyTorch) must say it was skipped."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, job_env

BENCHMARKS = REPO / "benchmarks"
RATIO = r"\d+\.\d\d"
TORCH = rf"({RATIO}|skipped \(PyTorch is not installed\))"

# script -> the lines its smallest run must print (regular expressions, searched in its output)
SMALLEST = {"compile": "--smoke", "gpu": "--simulate"}  # gpu.py without a GPU: every kernel once in the simulator  # compile.py's --quick is the book's model for a few steps (a minute on 2 cores)
LINES = {
    "compile": [rf"tiny: compiled teenygrad / eager teenygrad time per step: {RATIO}",
                rf"tiny: compiled teenygrad / PyTorch eager time per step: {TORCH}"],
    "compiled_kernels": [rf"layer norm \(768,128\) .* ratio {RATIO}", rf"linear \+ bias \+ GELU .* ratio {RATIO}"],
    "gpt": [rf"teenygrad / PyTorch time per step: {TORCH}"],
    "gpu": [r"sgemm blocked_2d .* max \|error\|", r"simulated: no figure is measured or recorded"],
    "grading_speed": [rf"check of 01-regression .*/ target \(20 s per notebook\): {RATIO}"],
    "matmul": [rf"default/numpy at 128 float32: {RATIO}", rf"teenygrad/numpy: {RATIO}"],
    "names_gpt": [r"teenygrad is \d+x faster per step"],
    "optim": [rf"adam at 65,536: fused kernel / Tensor ops time: {RATIO}; fused kernel / PyTorch: {TORCH}"],
    "scalar_autograd": [r"compiled >= 1000x the Value graph per example: \S+ [\d,]+x"],
    "startup": [rf"import teenygrad: median [\d.]+ s over 2 new processes; / target \(1 s\): {RATIO}"],
    "throughput": [rf"teenygrad/numpy speed, geometric mean: elementwise {RATIO}, reductions {RATIO}"],
}


def test_every_benchmark_script_is_run_here():
    scripts = {p.stem for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(LINES), f"benchmarks/ and this test's table differ: {scripts ^ set(LINES)}"


@pytest.mark.parametrize("name", sorted(LINES))
def test_benchmark_quick_form_runs_and_prints_its_ratio(name):
    # its share of the cores (conftest.job_env), and this checkout's teenygrad whatever the venv has installed
    env = {**job_env(), "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    flag = SMALLEST.get(name, "--quick")
    run = subprocess.run([sys.executable, str(BENCHMARKS / f"{name}.py"), flag], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, f"benchmarks/{name}.py {flag} failed ({run.returncode}):\n{out[-4000:]}"
    for line in LINES[name]:
        assert re.search(line, run.stdout), f"benchmarks/{name}.py {flag} printed no line matching {line!r}:\n{out}"


CHILD = """
import os, sys
sys.path.insert(0, {benchmarks!r})
from _timing import Child, alternate, numpy_env, run_in_child

def make(k):
    print("a child's prints go to its stderr")
    return (lambda x, y: x * k + y), os.environ.get("OPENBLAS_CORETYPE")

def fails():
    raise ValueError("from the child")

if __name__ == "__main__":
    with Child(make, 3, env=numpy_env()[0]) as child:
        times, results = alternate({{"child": child}}, [(1, 2), (3, 4)], warmup=1)
        print(child.info, results["child"], len(times["child"]), numpy_env()[1] is not None)
    try:
        run_in_child(fails)
    except RuntimeError as e:
        print("raised", "ValueError: from the child" in str(e))
"""


def test_child_process_helper(tmp_path):
    """benchmarks/_timing.py's Child: a step in another process, its environment without OPENBLAS_CORETYPE (and
    OPENBLAS_L2_SIZE) for numpy's side, its errors raised here."""
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(benchmarks=str(BENCHMARKS)))
    env = {**os.environ, "OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1000"}
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == ["None [5, 13] 1 True", "raised True"], run.stdout + run.stderr
    assert "a child's prints go to its stderr" in run.stderr
