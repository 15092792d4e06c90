"""The traffic harness: `python traffic_harness.py CONFIG.json`, run by `autograder.traffic` inside a sandbox.

It loads the learner's GPU launcher (by running the part's cells, saved as a file), says it is ready, then runs
calls the grader asks for. The arrays of a call are not here: each is a *remote* array, whose every element read
is a request to the grader (which answers with the value) and whose every element write is sent to it. So the
grader, in its own process, counts each element's loads and stores as it serves them, and holds the result.

Nothing here is trusted once the learner's code has run in this process, and nothing needs to be: the values
exist only in the grader, so a kernel that reads less than it must cannot compute the right product, and every
read it makes is one the grader serves and counts. The kernels run in numba-cuda's simulator (the sandbox's
environment switches it on before numba is imported), which hands a kernel the remote arrays as they are.

Protocol (this harness's standard output to the grader, its standard input back):
  harness: b"R"                                     loaded
  grader:  b"C" + u32 length + JSON {"shapes": [...], "args": [...]}   a call: the arrays' shapes, then arguments
  harness: b"L" + u8 array + i64 flat index         a load; the grader answers the element (float32, 4 bytes)
  harness: b"S" + u8 array + i64 flat index + f32   a store
  harness: b"D"  or  b"E" + u32 length + message    the call returned, or raised
Started like every program in this folder (`autograder.sandbox.start_program`); it needs numpy and numba-cuda.
"""
import json
import os
import runpy
import struct
import sys
import threading

import numpy as np


class _NoShell:
    """What `get_ipython()` returns here: a cell's magics do nothing outside a notebook."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class RemoteArray:
    """A float32 array that lives in the grader: the simulator's kernels index it element by element."""

    def __init__(self, which, shape, link):
        self.which, self.shape, self.link = which, tuple(shape), link
        self.dtype, self.ndim = np.dtype(np.float32), len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.itemsize, self.nbytes = 4, 4 * self.size
        self.strides = tuple(int(4 * np.prod(self.shape[i + 1:], dtype=np.int64)) for i in range(self.ndim))
        self.flags = {"C_CONTIGUOUS": True, "F_CONTIGUOUS": self.ndim <= 1}

    def __len__(self):
        return self.shape[0]

    def _flat(self, index):
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != self.ndim or not all(isinstance(i, (int, np.integer)) for i in index):
            raise TypeError(f"array {self.which} of shape {self.shape} was indexed with {index!r}: a kernel reads "
                            "and writes global memory one element at a time, with one integer per axis")
        if not all(0 <= i < n for i, n in zip(index, self.shape)):
            raise IndexError(f"element {tuple(int(i) for i in index)} of array {self.which} is outside its shape "
                             f"{self.shape}: a thread read or wrote past the edge (check the bounds)")
        flat = 0
        for i, n in zip(index, self.shape):
            flat = flat * n + int(i)
        return flat

    def __getitem__(self, index):
        return self.link.load(self.which, self._flat(index))

    def __setitem__(self, index, value):
        self.link.store(self.which, self._flat(index), value)


class Link:
    """The pipe to the grader; the simulator runs a block's threads at once, so one request at a time."""

    def __init__(self, requests, replies):
        self.requests, self.replies, self.lock = requests, replies, threading.Lock()

    def load(self, which, flat):
        with self.lock:
            self.replies.write(struct.pack("<cBq", b"L", which, flat))
            return np.frombuffer(_read_exactly(self.requests, 4), dtype=np.float32)[0]

    def store(self, which, flat, value):
        with self.lock:
            self.replies.write(struct.pack("<cBqf", b"S", which, flat, float(value)))


def _read_exactly(stream, n):
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError("the grader closed the pipe")
        data += chunk
    return data


def main() -> None:
    config = json.loads(open(sys.argv[1]).read())
    # the protocol gets its own descriptors; whatever the cells print goes to standard error
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    namespace = runpy.run_path(config["cells"], init_globals={"get_ipython": _NoShell}, run_name="__main__")
    if config["function"] not in namespace:
        raise NameError(f"the cells define no function {config['function']}")
    fn = namespace[config["function"]]
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray  # the simulator's device array

    link = Link(requests, replies)
    replies.write(b"R")
    while requests.read(1) == b"C":
        (length,) = struct.unpack("<I", _read_exactly(requests, 4))
        call = json.loads(_read_exactly(requests, length))
        arrays = [FakeCUDAArray(RemoteArray(k, shape, link)) for k, shape in enumerate(call["shapes"])]
        try:
            fn(*arrays, *call["args"])
        except Exception as e:  # the learner's error, told to the grader; the next call still runs
            message = f"{type(e).__name__}: {e}"[:2000].encode(errors="replace")
            with link.lock:
                replies.write(b"E" + struct.pack("<I", len(message)) + message)
            continue
        with link.lock:
            replies.write(b"D")


if __name__ == "__main__":
    main()
