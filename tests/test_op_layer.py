"""The op layer's shape: one kernel table and one rule table, each built in one place; no module edits another's
tables when imported (the only import loop, Tensor <-> ops: tests/test_structure.py); importing teenygrad leaves
the process alone;
every op, fused ones included, reaches its kernel through the table, so `kernels.use` can swap it."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import teenygrad as tg
from teenygrad import functional as F

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "teenygrad"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _module_level_mutations(path: Path) -> list[str]:
    """Module-level statements that change a table imported from another module: X.update(...),
    X.setdefault(...), X[k] = v, or del X[k], where X was imported."""
    tree = ast.parse(path.read_text())
    imported = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imported |= {(a.asname or a.name).split(".")[0] for a in node.names}
    found = []
    for node in tree.body:
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) else ():
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr in ("update", "setdefault", "pop", "clear"):
                root = sub.func.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id in imported:
                    found.append(ast.unparse(sub))
            if isinstance(sub, (ast.Assign, ast.Delete)):
                for target in getattr(sub, "targets", []):
                    if isinstance(target, (ast.Subscript, ast.Attribute)):
                        root = target.value
                        while isinstance(root, (ast.Attribute, ast.Subscript)):
                            root = root.value
                        if isinstance(root, ast.Name) and root.id in imported:
                            found.append(ast.unparse(target))
    return found


def test_no_module_edits_another_modules_table_when_imported(tmp_path):
    offenders = {m: found for m, p in MODULES.items() if (found := _module_level_mutations(p))}
    assert not offenders, offenders
    bad = tmp_path / "bad.py"  # the check can fail
    bad.write_text("from teenygrad import kernels\nkernels.KERNELS.update(x=1)\nkernels.DEFAULTS['y'] = 2\n")
    assert len(_module_level_mutations(bad)) == 2


SNAPSHOT = """
import importlib, json, os, pkgutil, sys
env = dict(os.environ)
import teenygrad
from teenygrad import kernels, ops
def tables():
    return {"kernels": sorted(kernels.KERNELS), "defaults": sorted(kernels.DEFAULTS), "rules": sorted(ops.RULES),
            "ids": sorted(f"{k}:{id(v)}" for k, v in {**kernels.KERNELS, **ops.RULES}.items())}
first = tables()
for info in pkgutil.walk_packages(teenygrad.__path__, "teenygrad."):
    importlib.import_module(info.name)
print(json.dumps({"first": first, "after": tables(), "env_same": env == dict(os.environ),
                  "changed": sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k))}))
"""


def test_importing_every_module_leaves_the_tables_and_the_environment_alone():
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    proc = subprocess.run([sys.executable, "-c", SNAPSHOT], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["first"] == got["after"]
    assert got["env_same"], got["changed"]
    assert got["first"]["kernels"] == got["first"]["defaults"]
    backward_kernels = {"gelu_backward", "softmax_backward", "cross_entropy_backward"}
    assert backward_kernels <= set(got["first"]["kernels"])
    # exercise pieces keep their kernels inside the marked function: no table entry answers the exercise
    assert not {"index_add", "scatter_add", "layer_norm_backward", "rms_norm_backward", "attention_backward", "attention_cached",
                "adam"} & set(
        got["first"]["kernels"])
    assert {"linear", "layer_norm", "rms_norm", "attention", "gelu", "matmul", "cross_entropy"} <= set(got["first"]["rules"])


TUNE = """
import json, os, numpy as np, teenygrad as tg
before = os.environ.get("GOMP_SPINCOUNT")
first = tg.tune()
after = os.environ.get("GOMP_SPINCOUNT")
np.ones(4)  # nothing else changes
print(json.dumps({"before": before, "after": after, "first": first, "again": tg.tune()}))
"""


def run_tune(env: dict) -> dict:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GOMP_", "MALLOC_"))}
    proc = subprocess.run([sys.executable, "-c", TUNE], capture_output=True, text=True, cwd=REPO,
                          env={**base, **env}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_tune_sets_the_spin_count_only_when_asked_and_never_overrides_the_user():
    got = run_tune({})
    assert got["before"] is None and got["after"] == "10000"
    assert got["first"]["GOMP_SPINCOUNT"] == "set to 10000" and got["again"]["GOMP_SPINCOUNT"].startswith("left at")
    mine = run_tune({"GOMP_SPINCOUNT": "5", "MALLOC_TRIM_THRESHOLD_": "1"})
    assert mine["after"] == "5" and "left" in mine["first"]["GOMP_SPINCOUNT"] and "left alone" in mine["first"]["malloc"]


@pytest.mark.parametrize("start", [
    "with tg.kernels.force_path('parallel'):\n    (tg.randn(64, 64) @ tg.randn(64, 64)).numpy()\n",
    "import ctypes, ctypes.util\nctypes.CDLL(ctypes.util.find_library('gomp') or 'libgomp.so.1')\n",  # as torch does
])
def test_tune_after_the_thread_pool_started_says_it_is_too_late(start):
    script = "import json, teenygrad as tg\n" + start + "print(json.dumps(tg.tune()))"
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "already started" in json.loads(proc.stdout.strip().splitlines()[-1])["GOMP_SPINCOUNT"]


def test_force_path_refuses_a_made_up_path():
    with pytest.raises(ValueError, match="'serial' or 'parallel'"):
        with tg.kernels.force_path("gpu"):
            pass


def _zeros_into(*args):
    """A kernel that writes zeros into every float array it is given after the first: proof it was called."""
    for a in args[1:]:
        if isinstance(a, np.ndarray) and a.dtype.kind == "f":
            a[...] = 0


@pytest.mark.parametrize("name, run", [
    ("layer_norm", lambda x: F.layer_norm(x)),
    ("rms_norm", lambda x: F.rms_norm(x)),
    ("attention", lambda x: F.causal_self_attention(x.reshape(2, 3, 12), 2)),
    ("gelu", lambda x: F.gelu(x)),
    ("softmax", lambda x: x.softmax(-1)),
])
def test_fused_ops_reach_their_kernel_through_the_table(name, run):
    x = tg.randn(6, 12)
    assert np.abs(run(x).numpy()).sum() > 0
    with tg.kernels.use(**{name: _zeros_into if name != "gelu" else
                           lambda shape, x, sx, ox, out: out.fill(0)}):
        assert np.abs(run(x).numpy()).sum() == 0
    assert np.abs(run(x).numpy()).sum() > 0  # and the default came back


def test_a_backward_kernel_can_be_swapped_too():
    x = tg.randn(4, 8).requires_grad_()
    F.gelu(x).sum().backward()
    assert np.abs(x.grad.numpy()).sum() > 0
    x.grad = None
    with tg.kernels.use(gelu_backward=lambda shape, x, sx, ox, g, sg, og, out: out.fill(0)):
        F.gelu(x).sum().backward()
    assert np.abs(x.grad.numpy()).sum() == 0
