"""The timing harness: `python timing_harness.py CONFIG.json`, run by `autograder.speed` inside a sandbox.

It loads one kernel, either the learner's (by running the part's cells, saved as a file) or a trusted
reference (`module:name`), says it is ready, then serves calls over its standard input and output: for each
call the grader sends the raw bytes of every argument (shapes and dtypes are in the config), the harness
calls the kernel on them and sends back the bytes of the last argument, the output the kernel fills.

Nothing here is trusted once the learner's code has run in this process, and nothing needs to be: the
grader reads the clock in its own process, sends inputs only after the clock starts, and checks every
output it gets back. Started like every program in this folder (`autograder.sandbox.start_program`: copied
into the sandbox's work folder and run from there); it needs only numpy.
"""
import importlib
import json
import os
import runpy
import sys

import numpy as np


class _NoShell:
    """What `get_ipython()` returns here: a cell's magics (%timeit) do nothing outside a notebook."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def _load(config: dict):
    if config.get("reference"):
        module, name = config["reference"].split(":")
        return getattr(importlib.import_module(module), name)
    # a real file, so that numba can compile (and cache) the learner's @kernel as in the notebook
    namespace = runpy.run_path(config["cells"], init_globals={"get_ipython": _NoShell}, run_name="__main__")
    if config["function"] not in namespace:
        raise NameError(f"the cells define no function {config['function']}")
    return namespace[config["function"]]


def _read_exactly(stream, view: memoryview) -> bool:
    done = 0
    while done < len(view):
        n = stream.readinto(view[done:])
        if not n:
            return False
        done += n
    return True


def main() -> None:
    config = json.loads(open(sys.argv[1]).read())
    # the protocol gets its own descriptors; whatever the cells print goes to standard error
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    fn = _load(config)
    args = [np.empty(shape, dtype=dtype) for shape, dtype in config["arguments"]]
    views = [memoryview(a).cast("B") if a.size else memoryview(bytearray()) for a in args]
    replies.write(b"R")
    while requests.read(1) == b"C":
        if not all(_read_exactly(requests, v) for v in views):
            return
        fn(*args)
        replies.write(views[-1])


if __name__ == "__main__":
    main()
