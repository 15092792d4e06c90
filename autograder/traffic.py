"""Points that depend on a GPU kernel's global-memory traffic, counted by the grader, never by the learner's process.

A notebook can patch anything in its own process, including a counter of loads that the package would hand it.
So, after the notebook has run, the grader counts the loads itself, as `autograder.speed` times kernels itself:

1. The part's cells (the notebook's locked setup cells and the part's solution cell, from the submission the grader
   holds) run in a fresh sandbox, as isolated as the kernel was (`autograder/sandboxed/traffic_harness.py`), in
   numba-cuda's simulator.
2. For every call the grader hands the learner's launcher *remote* arrays: their values stay here, in the grader's
   process, and each element a kernel thread reads is a request the grader answers and counts; each element it
   writes is sent here. Only values read through the grader can make the right result, so the counts cannot be
   faked without the result coming out wrong.
3. The part's `check` gets the arrays as the kernel left them and the loads and stores of every element.

Every element read is a round trip through a pipe, and the simulator runs every thread in Python: the shapes are
tiny (a few blocks).
"""
from __future__ import annotations

import json
import os
import select
import signal
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat
import numpy as np

from autograder import sandbox
from autograder.speed import part_cells

LOAD_SECONDS = 120  # starting Python, importing numba-cuda and teenygrad, running the setup cells
CALL_SECONDS = 60  # one call on the simulator; a few thousand loads take about a second
MAX_MESSAGES = 2_000_000  # loads and stores in one call: a kernel that reads without end is stopped here


@dataclass
class Traffic:
    """How a part's traffic is judged: `function` from the part's cells, on the arrays of `calls`."""

    function: str  # the learner's launcher, defined by the part's solution cell
    # calls(rng) -> [(arrays, args)]: float32 arrays handed over as remote arrays (inputs, and the outputs the
    # kernel fills: their values are what the kernel would find there), then plain arguments (ints) after them
    calls: Callable[[np.random.Generator], list[tuple[list[np.ndarray], list]]]
    # check(arrays, args, after, loads, stores) -> None when right, else why not: `after` holds the arrays as the
    # kernel left them, `loads` and `stores` count the reads and writes of every element, shaped as the arrays
    check: Callable[..., str | None]


class _Harness:
    """The learner's launcher served from a sandbox; `call` runs one call, serving its loads from here."""

    def __init__(self, box: sandbox.Box, config: dict, log: Path):
        self.spec, self.log = box.spec, log
        with open(log, "wb") as err:
            self.proc = sandbox.start_program(box, "traffic_harness", config, stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, stderr=err)
        self.out = self.proc.stdout.fileno()
        self.buffer = b""

    def _read(self, n: int, deadline: float) -> bytes | None:
        while len(self.buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.out], [], [], left)[0]:
                return None
            chunk = os.read(self.out, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def ready(self) -> bool:
        return self._read(1, time.monotonic() + LOAD_SECONDS) == b"R"

    def call(self, arrays: list[np.ndarray], args: list) -> tuple[str, list[np.ndarray], list[np.ndarray]]:
        """Run one call; (why it failed or "", loads of each element, stores of each element). `arrays` are
        float32 and are changed in place by the kernel's stores."""
        flat = [a.reshape(-1) for a in arrays]
        loads = [np.zeros(a.size, dtype=np.int64) for a in arrays]
        stores = [np.zeros(a.size, dtype=np.int64) for a in arrays]
        request = json.dumps({"shapes": [list(a.shape) for a in arrays], "args": [int(v) for v in args]}).encode()
        try:
            self.proc.stdin.write(b"C" + struct.pack("<I", len(request)) + request)
            self.proc.stdin.flush()
        except OSError:
            return f"it stopped: {self.why_not() or 'no answer'}", loads, stores
        deadline = time.monotonic() + CALL_SECONDS
        for _ in range(MAX_MESSAGES):
            op = self._read(1, deadline)
            if op == b"D":
                return "", loads, stores
            if op == b"E":
                head = self._read(4, deadline)
                message = self._read(struct.unpack("<I", head)[0], deadline) if head else None
                return f"raised {message.decode(errors='replace')[:300]}" if message else "it stopped", loads, stores
            if op not in (b"L", b"S"):
                if op is None and self.proc.poll() is None:
                    return f"a call took longer than {CALL_SECONDS} s", loads, stores
                return f"it stopped: {self.why_not() or 'no answer'}", loads, stores
            head = self._read(9, deadline)
            if head is None:
                return "it stopped in the middle of a request", loads, stores
            which, index = struct.unpack("<Bq", head)
            if which >= len(flat) or not 0 <= index < flat[which].size:
                return "it asked for an element that does not exist", loads, stores
            if op == b"L":
                loads[which][index] += 1
                try:
                    self.proc.stdin.write(flat[which][index:index + 1].tobytes())
                    self.proc.stdin.flush()
                except OSError:
                    return f"it stopped: {self.why_not() or 'no answer'}", loads, stores
            else:
                value = self._read(4, deadline)
                if value is None:
                    return "it stopped in the middle of a store", loads, stores
                stores[which][index] += 1
                flat[which][index] = np.frombuffer(value, dtype=np.float32)[0]
        return f"a call read and wrote more than {MAX_MESSAGES} elements", loads, stores

    def why_not(self) -> str:
        """The last line the harness wrote to standard error (a traceback's), for the learner."""
        with open(self.log, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 65536))
            lines = [line for line in f.read().decode(errors="replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGTERM)  # the wrapper kills everything in the sandbox
            self.proc.wait()
        sandbox.sweep(self.spec)


def judge_traffic(nb: nbformat.NotebookNode, part: str, traffic: Traffic, box: sandbox.Box, seed: int) -> str | None:
    """None if the learner's launcher in `nb`, run in `box`, computes every call right with the traffic `check`
    allows; else why not."""
    cells = box.work / "cells.py"
    cells.write_text(part_cells(nb, part))
    sandbox.give_to(cells, box.spec["uid"])
    harness = _Harness(box, {"cells": str(cells), "function": traffic.function}, box.work / ".harness.log")
    try:
        if not harness.ready():
            return f"counted by the grader, {traffic.function} could not be loaded: {harness.why_not() or 'no answer'}"
        for arrays, args in traffic.calls(np.random.default_rng(seed)):
            arrays = [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]
            given = [a.copy() for a in arrays]
            why, loads, stores = harness.call(arrays, args)
            if not why:
                why = traffic.check(given, args, arrays, [n.reshape(a.shape) for n, a in zip(loads, arrays)],
                                    [n.reshape(a.shape) for n, a in zip(stores, arrays)])
            if why:
                return f"counted by the grader, {traffic.function}{_shapes(given, args)}: {why}"
        return None
    finally:
        harness.close()


def _shapes(arrays: list[np.ndarray], args: list) -> str:
    return "(" + ", ".join([*("x".join(map(str, a.shape)) for a in arrays), *(str(int(v)) for v in args)]) + ")"
