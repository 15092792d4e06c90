"""Is a compiled function being traced right now? (chapter 10)

The op layer asks this once per op: `if tracing.active: return tracing.hooks.<op>(...)`. While
`teenygrad.compile` traces a function, `active` is True and `hooks` holds the lazy launchers of
`teenygrad.compiler.capture` (`compiled.HOOKS`), which turn the op into graph nodes instead of running a kernel.
The rest of the time `active` is False and the eager path pays one module-attribute read.

It lives outside the compiler package on purpose: every op family imports it, and it imports nothing, so the op
layer needs no import of the compiler (no import loop, and `import teenygrad.ops` stays light).
"""
from __future__ import annotations

from typing import Any

active: bool = False  # True only inside a trace (teenygrad.compiler)
hooks: Any = None     # teenygrad.compiler.compiled.HOOKS while a trace runs
