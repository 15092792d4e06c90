"""The one function an exercise's hidden tests call (every chapter's exercise): `report(part, fn)`.

Grading model: the learner's process only *computes*. The autograder writes each part's inputs to
`$TEENYGRAD_GRADING_DIR/cases/<part>/<i>.npz`; `report` calls the learner's function on them and saves what it
returns to `$TEENYGRAD_GRADING_DIR/results/<part>/<i>.npz` (or `<i>.err` with the exception). The grader,
in its own process, compares those outputs with its reference on the inputs it kept in memory. Nothing
the notebook patches (assert, numpy.testing, __eq__, IPython's error display) changes that comparison, and
there is no answer in the notebook to read.

Outside the autograder (a learner running a notebook that still has its hidden tests) `report` just says so.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

GRADING_DIR_ENV = "TEENYGRAD_GRADING_DIR"


def _to_array(value: Any) -> np.ndarray:
    if hasattr(value, "numpy"):  # a teenygrad (or any) tensor
        value = value.numpy()
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeError(f"returned {type(value).__name__}, which is not a number or an array of numbers")
    return array


def load_case(path: Path) -> list[Any]:
    """The arguments stored in one case file; 0-d arrays come back as Python scalars."""
    with np.load(path, allow_pickle=False) as z:
        args = [z[f"arg{i}"] for i in range(len(z.files))]
    return [a.item() if a.ndim == 0 else a for a in args]


def report(part: str, fn: Callable[..., Any]) -> None:
    """Run `fn` on every case the grader prepared for `part` and save the outputs for the grader."""
    root = os.environ.get(GRADING_DIR_ENV)
    if not root:
        print(f"{part}: hidden tests run only under the autograder (python -m autograder check NOTEBOOK)")
        return
    case_dir = Path(root) / "cases" / part
    out_dir = Path(root) / "results" / part
    out_dir.mkdir(parents=True, exist_ok=True)
    cases = sorted(case_dir.glob("*.npz"), key=lambda p: int(p.stem))
    for path in cases:
        try:
            outputs = fn(*load_case(path))
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            np.savez(out_dir / f"{path.stem}.npz", **{f"out{i}": _to_array(o) for i, o in enumerate(outputs)})
        except Exception as e:  # one failing case must not hide the others
            (out_dir / f"{path.stem}.err").write_text(f"{type(e).__name__}: {e}"[:2000])
    print(f"{part}: ran {len(cases)} hidden cases; the autograder judges the results")


# ---- the compiler's exercise (10-compiler): the programs its hidden tests compile ----------------------------------

PROGRAM_OPS = ("exp", "tanh twice", "square twice", "add row", "flip", "transpose", "interleave", "centre rows",
               "shift columns", "softmax twice", "identities")


def random_program(x: Any, row: Any, codes: Any) -> Any:
    """A composition of Tensor ops on a square x (n, n) and a row (n,), one op per code (an int, PROGRAM_OPS[code]):
    the graphs exercise 10 is graded on. Some compute one expression twice (work for common-subexpression
    elimination); some read x through a view (reversed, transposed, strided, broadcast: index arithmetic); one
    multiplies by 1 and adds 0s, one of them computed from constants alone (work for constant folding)."""
    n = x.shape[0]
    for code in codes:
        op = PROGRAM_OPS[int(code) % len(PROGRAM_OPS)]
        if op == "exp":
            x = (x * 0.5).exp()
        elif op == "tanh twice":
            x = x.tanh() + x.tanh() * 0.5
        elif op == "square twice":
            x = x * x - (x * x).sum(1, keepdim=True) / n
        elif op == "add row":
            x = x + row
        elif op == "flip":
            x = x[::-1]
        elif op == "transpose":
            x = x.transpose(0, 1)
        elif op == "interleave":  # every other row, then the rest: strided reads
            x = _cat([x[::2], x[1::2]])
        elif op == "centre rows":
            x = x - x.max(1, keepdim=True)
        elif op == "shift columns":
            x = x + x.sum(0, keepdim=True) / n
        elif op == "softmax twice":
            x = x.softmax(-1) + x.softmax(-1) * x
        else:
            x = x * 1.0 + 0.0 + (_ones(n) * 0.5 - 0.5)
    return x


def _ones(n: int) -> Any:
    from teenygrad import ones
    return ones(n)


def _cat(parts: list) -> Any:
    from teenygrad import cat  # here, not at the top: importing teenygrad.grading must stay cheap
    return cat(parts, 0)
