"""Run a solutions notebook's functions as teenygrad's pieces, the way its test cells do (`tg.edition.install`)."""
from __future__ import annotations

import contextlib
from typing import Iterator

from teenygrad import edition


@contextlib.contextmanager
def pieces_from(namespace: dict, assignment: str, parts=None) -> Iterator[None]:
    """Install the functions of `namespace` for `parts` (default: every part) of `assignment`; uninstall after."""
    done = []
    try:
        for part, pieces in edition.parts(assignment).items():
            if parts is not None and part not in parts:
                continue
            edition.install(assignment, part, *(edition.learners_function(namespace, p) for p in pieces
                                                  if not p.kernel))
            done.append(part)
        yield
    finally:
        for part in done:
            edition.uninstall(assignment, part)
