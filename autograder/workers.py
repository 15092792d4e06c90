"""The fork server the grading workers come from.

A worker is a process of its own (whatever happens in it costs one submission), but a fresh interpreter spends
about 3 s importing nbgrader, nbconvert and teenygrad before it grades anything. So one server process imports
`PRELOAD` once, and each worker is forked from it (multiprocessing's "forkserver" start method): a clean,
single-threaded copy with everything imported. `start` is cheap and starts the import at once, so the server
loads while the grader prepares the course.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver

PRELOAD = ["autograder.worker", "nbgrader.apps.api", "nbgrader.converters", "nbclient", "jupyter_client"]
WORKERS = multiprocessing.get_context("forkserver")


def start() -> None:
    """Start the fork server (if it is not running), importing PRELOAD in the background."""
    WORKERS.set_forkserver_preload(PRELOAD)
    multiprocessing.forkserver.ensure_running()
