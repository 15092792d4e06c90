"""Is a compiled function being traced right now? (chapter 10)

The op layer asks this once per op: `if tracing.active: return tracing.hooks.<op>(...)`. While
`teenygrad.compile` traces a function, `active` is True and `hooks` holds the lazy launchers of
`teenygrad.compiler.capture` (`compiled.HOOKS`), which turn the op into graph nodes instead of running a kernel.
The rest of the time `active` is False and the eager path pays one module-attribute read.

It lives outside the compiler package on purpose: every op family imports it, and it imports nothing of teenygrad,
so the op layer needs no import of the compiler (no import loop, and `import teenygrad.ops` stays light).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

active: bool = False  # True only inside a trace (teenygrad.compiler)
hooks: Any = None     # teenygrad.compiler.compiled.HOOKS while a trace runs


def hooked(name: str) -> Callable[[F], F]:
    """Run `hooks.<name>` instead of the decorated function inside a trace, the function itself otherwise.

    For a piece of an exercise that a compiled step calls (`optim.clip_grad_norm`): placed above its @exercise
    mark, so that whoever wrote the eager body (the book, or a learner reading values with .numpy()), the trace
    never runs it."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if active:
                return getattr(hooks, name)(*args, **kwargs)
            return fn(*args, **kwargs)
        return call  # type: ignore[return-value]
    return wrap
