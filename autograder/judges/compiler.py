"""Judge for assignment 10-compiler: the index arithmetic of a view, and common-subexpression elimination
(exercises/10-compiler.ipynb).

The learner writes three pieces of teenygrad's compiler: `codegen.index_expr` (part `index_expr`: a view's flat
position as Python source, the first step of code generation), `passes.eliminate_common` (part `cse`) and
`passes.fold_constants` (part `fold_constants`). The
hidden tests install them and run teenygrad's compiler on the cases below; this judge checks the results against
numpy.

  index_expr  (shape, strides, offset)     -> the position index_expr's source gives for every element, in
                                              row-major order (evaluated by the hidden test)
              (x, row, codes, bits)        -> grading.random_program compiled by tg.compile (numba back end,
                                              the learner's index_expr in every kernel) on x (n, n) and row (n,)
                                              in float`bits`
  cse         (x, row, codes, bits)        -> (the program's values with the learner's CSE among the passes
                                              (backend="passes"), nodes before CSE, nodes after)
  fold_constants (x, row, codes, bits)     -> (the values with the learner's constant folding among the passes,
                                              nodes before folding, nodes after, ops left whose sources are
                                              all constants)
The programs (teenygrad.grading.random_program, PROGRAM_OPS) are computed here again in numpy: the oracle.
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part, compare
from teenygrad.grading import PROGRAM_OPS

VIEW_HEAVY = ("flip", "transpose", "interleave", "add row", "shift columns")
REPEATS = ("tanh twice", "square twice", "softmax twice")


def program(x: np.ndarray, row: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """grading.random_program in numpy."""
    n = x.shape[0]
    for code in np.atleast_1d(codes):
        op = PROGRAM_OPS[int(code) % len(PROGRAM_OPS)]
        if op == "exp":
            x = np.exp(x * 0.5)
        elif op == "tanh twice":
            x = np.tanh(x) * 1.5
        elif op == "square twice":
            x = x * x - (x * x).sum(1, keepdims=True) / n
        elif op == "add row":
            x = x + row
        elif op == "flip":
            x = x[::-1]
        elif op == "transpose":
            x = x.T
        elif op == "interleave":
            x = np.concatenate([x[::2], x[1::2]], 0)
        elif op == "centre rows":
            x = x - x.max(1, keepdims=True)
        elif op == "shift columns":
            x = x + x.sum(0, keepdims=True) / n
        elif op == "softmax twice":
            e = np.exp(x - x.max(1, keepdims=True))
            s = e / e.sum(1, keepdims=True)
            x = s + s * x
    return x  # "identities": x * 1 + 0 + 0


def _codes(rng: np.random.Generator, must: tuple[str, ...], count: int) -> np.ndarray:
    """`count` op codes, at least two of them from `must`, in random order."""
    picks = [PROGRAM_OPS.index(m) for m in rng.choice(must, 2)]
    picks += [int(c) for c in rng.integers(0, len(PROGRAM_OPS), count - 2)]
    return np.array(rng.permutation(picks), dtype=np.int64)


def _program_case(rng: np.random.Generator, must: tuple[str, ...], bits: int) -> Case:
    n = int(rng.integers(3, 8))
    x = rng.standard_normal((n, n))
    return x, rng.standard_normal(n), _codes(rng, must, int(rng.integers(3, 6))), bits


def _view_case(rng: np.random.Generator) -> Case:
    ndim = int(rng.integers(1, 5))
    shape = rng.integers(1, 5, ndim)
    strides = rng.integers(-9, 10, ndim) * (rng.random(ndim) < 0.8)  # some 0: broadcast axes
    offset = int(rng.integers(0, 3)) * int(rng.integers(0, 40))
    return shape.astype(np.int64), strides.astype(np.int64), offset


def _index_cases(rng: np.random.Generator) -> list[Case]:
    views = [_view_case(rng) for _ in range(12)]
    views.append((np.array([3, 1, 4]), np.array([4, 99, 1]), 0))   # a length-1 axis: its stride never counts
    views.append((np.array([5]), np.array([0]), 7))                 # one element broadcast: the offset alone
    return views + [_program_case(rng, VIEW_HEAVY, bits) for bits in (64, 64, 32)]


def _check_index(case: Case, got: tuple) -> str | None:
    if len(case) == 4:
        x, row, codes, bits = case
        want = program(np.asarray(x, np.float64), np.asarray(row, np.float64), codes)
        part = Part(cases=lambda rng: [], rtol=1e-9 if bits == 64 else 2e-4, atol=1e-9 if bits == 64 else 2e-5)
        why = compare(got, (want,), part)
        ops = [PROGRAM_OPS[int(c) % len(PROGRAM_OPS)] for c in np.atleast_1d(codes)]
        return None if why is None else f"the compiled program {ops} in float{bits}: {why}"
    shape, strides, offset = np.atleast_1d(case[0]), np.atleast_1d(case[1]), int(case[2])
    grid = np.indices(tuple(int(s) for s in shape)).reshape(len(shape), -1)
    want = offset + (grid * strides[:, None]).sum(0)
    why = compare(got, (want,), Part(cases=lambda rng: [], rtol=0, atol=0))
    return None if why is None else (f"index_expr of a view of shape {tuple(shape)}, strides {tuple(strides)}, "
                                     f"offset {offset}: {why}")


def _cse_cases(rng: np.random.Generator) -> list[Case]:
    return [_program_case(rng, REPEATS, bits) for bits in (64, 64, 64, 32)]


def _check_values(case: Case, got: tuple, outputs: str, passes: str) -> tuple[list[str], str | None]:
    """(the program's ops, why the values in `got` are wrong or it has not the `outputs` a pass reports, or None)."""
    x, row, codes, bits = case
    ops = [PROGRAM_OPS[int(c) % len(PROGRAM_OPS)] for c in np.atleast_1d(codes)]
    if len(got) != len(outputs.split(", ")):
        return ops, f"expected ({outputs}), got {len(got)} outputs"
    want = program(np.asarray(x, np.float64), np.asarray(row, np.float64), codes)
    part = Part(cases=lambda rng: [], rtol=1e-9 if bits == 64 else 2e-4, atol=1e-9 if bits == 64 else 2e-5)
    why = compare(got[:1], (want,), part)
    return ops, None if why is None else f"the program {ops} in float{bits}, with {passes} among the passes: {why}"


def _check_cse(case: Case, got: tuple) -> str | None:
    ops, why = _check_values(case, got, "values, nodes before, nodes after", "your CSE")
    if why is not None:
        return why
    before, after = int(got[1]), int(got[2])
    if not after < before:  # every program repeats an expression (REPEATS)
        return (f"the program {ops} computes some expressions twice, but your CSE left {after} of its {before} "
                f"nodes: nothing was merged")
    return None


def _fold_cases(rng: np.random.Generator) -> list[Case]:
    return [_program_case(rng, ("identities",), bits) for bits in (64, 64, 32)]


def _check_fold(case: Case, got: tuple) -> str | None:
    ops, why = _check_values(case, got, "values, nodes before, nodes after, constant ops left",
                             "your constant folding")
    if why is not None:
        return why
    before, after, left = int(got[1]), int(got[2]), int(got[3])
    if left:
        return f"the program {ops}: after your folding {left} op(s) still have only constants as sources"
    if not after < before:  # "identities" multiplies by 1 and adds 0
        return f"the program {ops} multiplies by 1 and adds 0, but your folding left {after} of its {before} nodes"
    return None


PARTS = {
    "index_expr": Part(cases=_index_cases, check=_check_index),
    "cse": Part(cases=_cse_cases, check=_check_cse),
    "fold_constants": Part(cases=_fold_cases, check=_check_fold),
}
