"""Judges: the trusted half of every hidden test.

An assignment `NN-name` has a module `autograder/judges/name_with_underscores.py` defining `PARTS`, a dict
from part name to `Part`. A part named `predict` belongs to the graded test cell `test_predict` of the
notebook, whose hidden tests call `teenygrad.grading.report("predict", fn)`.

The judge runs in the grader's process, never in the learner's: it draws the inputs, keeps them in memory,
and compares the learner's reported outputs with `reference(*inputs)` (or runs `check`).
"""
from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from autograder.speed import Speed
from autograder.traffic import Traffic

Case = tuple  # the positional arguments of one call


@dataclass
class Part:
    """One graded part: how to draw inputs, and how to tell a right answer."""

    cases: Callable[[np.random.Generator], list[Case]]
    reference: Callable[..., Any] | None = None  # reference(*case) -> expected output (or tuple of them)
    check: Callable[[Case, tuple], str | None] | None = None  # returns None if right, else why not
    rtol: float = 1e-5
    atol: float = 1e-6
    speed: Speed | None = None  # a speed requirement too, timed by the grader (autograder/speed.py)
    traffic: Traffic | None = None  # a GPU kernel's memory traffic too, counted by the grader (autograder/traffic.py)


def load(assignment: str) -> dict[str, Part]:
    """The parts of `assignment` (for example `01-regression`)."""
    match = re.fullmatch(r"\d\d-([a-z0-9-]+)", assignment)
    if not match:
        raise ValueError(f"not an assignment name: {assignment!r} (expected NN-name, e.g. 01-regression)")
    module = importlib.import_module(f"autograder.judges.{match.group(1).replace('-', '_')}")
    return module.PARTS


def write_cases(parts: dict[str, Part], root: Path, seed: int) -> dict[str, list[Case]]:
    """Draw every part's inputs with a fresh seed, write them for the learner's process, return them."""
    drawn = {}
    for name, part in parts.items():
        rng = np.random.default_rng([seed, len(name), *name.encode()])
        cases = part.cases(rng)
        (root / "cases" / name).mkdir(parents=True, exist_ok=True)
        for i, case in enumerate(cases):
            np.savez(root / "cases" / name / f"{i}.npz", **{f"arg{j}": np.asarray(a) for j, a in enumerate(case)})
        drawn[name] = cases
    return drawn


def compare(got: tuple, want: tuple, part: Part) -> str | None:
    if len(got) != len(want):
        return f"returned {len(got)} values, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        which = f" (output {k})" if len(want) > 1 else ""
        if g.shape != w.shape:
            return f"shape {g.shape}{which}, expected {w.shape}"
        if not np.issubdtype(g.dtype, np.number) and g.dtype != bool:
            return f"dtype {g.dtype}{which} is not numeric"
        if not np.allclose(g, w, rtol=part.rtol, atol=part.atol, equal_nan=False):
            err = np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))) if g.size else 0.0
            return f"wrong values{which}: largest error {err:.3g}"
    return None


def judge(parts: dict[str, Part], drawn: dict[str, list[Case]], root: Path) -> dict[str, str | None]:
    """For each part, None if every case is right, else the first reason it is not."""
    verdicts: dict[str, str | None] = {}
    for name, part in parts.items():
        verdicts[name] = None
        out_dir = root / "results" / name
        for i, case in enumerate(drawn[name]):
            err, res = out_dir / f"{i}.err", out_dir / f"{i}.npz"
            try:
                if err.is_file():
                    why = f"raised {err.read_text(errors='replace')[:300]}"
                elif not res.is_file():
                    why = "the hidden tests did not run (an earlier error, or the test cell was skipped)"
                else:
                    with np.load(res, allow_pickle=False) as z:
                        got = tuple(z[f"out{k}"] for k in range(len(z.files)))
                    if part.check is not None:
                        why = part.check(case, got)
                    else:
                        want = part.reference(*case)
                        why = compare(got, want if isinstance(want, tuple) else (want,), part)
            except Exception as e:  # a malformed result file is the learner's loss, never the grader's crash
                why = f"unreadable result ({type(e).__name__})"
            if why:
                verdicts[name] = f"hidden case {i + 1} of {len(drawn[name])}: {why}"
                break
    return verdicts
