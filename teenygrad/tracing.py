"""Is a compiled function being traced right now? (chapter 10)

The op layer asks this once per op: `if tracing.active: return tracing.hooks.<op>(...)`. While
`teenygrad.compile` traces a function, `active` is True and `hooks` is `teenygrad.lazy_ops`, which turns the op
into graph nodes instead of running a kernel. The rest of the time `active` is False and the eager path pays one
module-attribute read. This module imports nothing, so every op family can import it without an import loop.
"""
from __future__ import annotations

from typing import Any

active: bool = False  # True only inside a trace (teenygrad.compiler)
hooks: Any = None     # teenygrad.lazy_ops while a trace runs
