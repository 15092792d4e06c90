"""Count a kernel's global-memory traffic in numba-cuda's simulator (chapter 11).

On a GPU the bytes a kernel moves are what its speed is mostly about; the simulator can count them exactly. Hand
a kernel `Counted` arrays instead of numpy arrays: the simulator passes any object that is not a numpy array to the
kernel as it is, so every `x[i, j]` a thread reads is a call of `Counted.__getitem__`, counted per element. (On a
GPU a `Counted` array cannot be used: counting is for the simulator.)

    a, b, out = Counted(a), Counted(b), Counted(out)
    sgemm_naive(a, b, out)
    a.loads.sum()   # loads of a's elements, all threads together
"""
from __future__ import annotations

import threading

import numpy as np


class Counted:
    """A numpy array whose element loads and stores, by kernel threads in the simulator, are counted."""

    def __init__(self, array: np.ndarray):
        self.array = np.asarray(array)
        self.loads = np.zeros(self.array.shape, np.int64)   # loads of each element
        self.stores = np.zeros(self.array.shape, np.int64)  # stores into each element
        self._lock = threading.Lock()  # the simulator's threads are Python threads: one count at a time
        self.shape, self.ndim, self.size = self.array.shape, self.array.ndim, self.array.size
        self.dtype = self.array.dtype

    def __getitem__(self, index):
        value = self.array[index]
        with self._lock:
            self.loads[index] += 1
        return value

    def __setitem__(self, index, value) -> None:
        self.array[index] = value
        with self._lock:
            self.stores[index] += 1

    def __len__(self) -> int:
        return len(self.array)

    def bytes_moved(self) -> int:
        """Bytes loaded and stored, at the element's size each time (no cache between threads, as the counts are)."""
        return int(self.loads.sum() + self.stores.sum()) * self.array.itemsize
