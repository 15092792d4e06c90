"""Gradient checking (chapter 6): compare backward's gradients with central finite differences.

    df/dx_i  ~  (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)        (error O(eps^2))

Done in float64: with eps = 1e-6 the difference quotient keeps ~10 significant digits there, while in
float32 (7 digits in all) rounding would swamp it. A non-scalar output y is checked through
L = sum(y * w) for a fixed random w, so one backward gives the analytic gradient of every input; a wrong
rule shows up in that product with probability 1.

    report = teenygrad.gradcheck(lambda a, b: (a * b).sum(), [a, b])
    print(report)          # max |analytic - numeric| per input
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from teenygrad import autograd
from teenygrad.tensor import Tensor, float64, int64


class GradcheckError(AssertionError):
    """The analytic and numeric gradients disagree (the message is the full report)."""


@dataclass
class InputReport:
    index: int
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float
    ok: bool


@dataclass
class GradcheckReport:
    inputs: list[InputReport]
    atol: float
    rtol: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.inputs)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        lines = [f"gradcheck {'passed' if self.ok else 'FAILED'} (|analytic - numeric| <= {self.atol:g} + "
                 f"{self.rtol:g} |numeric|)"]
        for r in self.inputs:
            lines.append(f"  input {r.index} {str(r.shape):<14} max abs error {r.max_abs_error:.3e}   "
                         f"max rel error {r.max_rel_error:.3e}   {'ok' if r.ok else 'MISMATCH'}")
        return "\n".join(lines)


def gradcheck(fn: Callable[..., Tensor], inputs: Sequence[Tensor], eps: float = 1e-6, atol: float = 1e-5,
              rtol: float = 1e-3, raise_exception: bool = True, seed: int = 0) -> GradcheckReport:
    """Check backward's gradient of `fn(*inputs)` for every float input against central differences.

    Float inputs are copied to float64 with requires_grad=True (int64 inputs, e.g. indices, are passed
    as they are). Returns a report (true when every input passes); on a mismatch raises GradcheckError
    with the report, or with raise_exception=False returns the (false) report.
    """
    args = [Tensor(x.numpy(), dtype=float64, requires_grad=True) if x.dtype != int64 else x for x in inputs]
    checked = [i for i, x in enumerate(args) if x.dtype != int64]
    y = fn(*args)
    w = Tensor(np.random.default_rng(seed).standard_normal(y.shape), dtype=float64)

    def loss() -> float:
        with autograd.no_grad():
            return (fn(*args).double() * w).sum().item()

    (y.double() * w).sum().backward()
    reports = []
    for i in checked:
        x = args[i]
        analytic = x.grad.numpy() if x.grad is not None else np.zeros(x.shape)
        numeric = np.zeros(x.shape)
        flat, buf = numeric.reshape(-1), x._buf  # x is a fresh contiguous copy: poke its buffer directly
        for k in range(x.size):
            old = buf[k]
            buf[k] = old + eps
            up = loss()
            buf[k] = old - eps
            down = loss()
            buf[k] = old
            flat[k] = (up - down) / (2 * eps)
        err = np.abs(analytic - numeric)
        rel = err / np.maximum(np.abs(numeric), 1e-12)
        reports.append(InputReport(i, x.shape, float(err.max(initial=0.0)), float(rel.max(initial=0.0)),
                                   bool(np.all(err <= atol + rtol * np.abs(numeric)))))
    report = GradcheckReport(reports, atol, rtol)
    if raise_exception and not report.ok:
        raise GradcheckError(str(report))
    return report
