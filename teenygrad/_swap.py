"""Swapping entries of a table for the length of a `with` block (chapters 3, 5 and 6: `kernels.use`,
`value.use_op`, `autograd.use_rules`).

teenygrad looks its kernels, backward rules and Value ops up in tables at the moment it needs them, so an
exercise can plug a learner's own function in for one block and be sure the original comes back after,
also when the block raises.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator


@contextlib.contextmanager
def swapped(table: dict[str, Any], kind: str, **swaps: Any) -> Iterator[None]:
    """Replace `table[name]` by `swaps[name]` inside the block; `kind` names the entries in errors."""
    unknown = sorted(set(swaps) - set(table))
    if unknown:
        raise KeyError(f"unknown {kind} name(s) {', '.join(unknown)}; known {kind}s: {', '.join(sorted(table))}")
    saved = {name: table[name] for name in swaps}
    table.update(swaps)
    try:
        yield
    finally:
        table.update(saved)
