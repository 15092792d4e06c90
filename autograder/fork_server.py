"""The fork server the grading processes come from, and `run`: one function in a forked process, with a deadline.

Each submission is graded in a process of its own (whatever happens in it costs one submission), but a fresh
interpreter spends about 3 s importing nbgrader, nbconvert and teenygrad before it grades anything. So one server
process imports `PRELOAD` once, and each grading process is forked from it (multiprocessing's "forkserver" start
method): a clean, single-threaded copy with everything imported. `start` is cheap and starts the import at once,
so the server loads while the grader prepares the course.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
from typing import Any, Callable

PRELOAD = ["autograder.grade_submission", "nbgrader.apps.api", "nbgrader.converters", "nbclient", "jupyter_client"]
CONTEXT = multiprocessing.get_context("forkserver")


def start() -> None:
    """Start the fork server (if it is not running), importing PRELOAD in the background."""
    CONTEXT.set_forkserver_preload(PRELOAD)
    multiprocessing.forkserver.ensure_running()


def run(target: Callable[..., Any], args: tuple, log_file: str, timeout: float) -> int | None:
    """Run `target(*args)` in a process forked from the server; its exit code, or None if it ran past `timeout`
    seconds and was killed, with its whole process group."""
    proc = CONTEXT.Process(target=_in_session, args=(target, args, log_file))
    proc.start()
    proc.join(timeout=timeout)
    if proc.exitcode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the process and its process group
        except ProcessLookupError:  # it had not made its process group yet
            proc.kill()
        proc.join()
        return None
    return proc.exitcode


def _in_session(target: Callable[..., Any], args: tuple, log_file: str) -> None:
    """In the forked process: a session of its own (`run` kills its process group on a timeout; a sandboxed kernel
    has a session and a wall-clock limit of its own), its output to `log_file`."""
    os.setsid()
    log = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    target(*args)
    sys.exit(0)
