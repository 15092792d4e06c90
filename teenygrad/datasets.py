"""The book's data sets (chapter 1 onwards), shipped inside the package so nothing is downloaded at run time, and
`batches`, the shuffled mini-batches a training loop walks over (chapter 7).

Sources and credits are in `teenygrad/data/DATA.md`. Every loader returns plain numpy arrays or Python
strings: numpy is teenygrad's storage and I/O layer.
"""
from __future__ import annotations

import csv
import gzip
from pathlib import Path
from typing import Iterator

import numpy as np

from teenygrad.edition import exercise
from teenygrad.tensor import Tensor, default_generator, int64

DATA_DIR = Path(__file__).resolve().parent / "data"


def _path(name: str) -> Path:
    path = DATA_DIR / name
    if not path.exists():  # a broken install, not a user mistake: say where we looked
        raise FileNotFoundError(f"teenygrad data file {name!r} is missing from {DATA_DIR}; reinstall teenygrad")
    return path


def load_housing() -> tuple[np.ndarray, np.ndarray, list[str]]:
    """House sales in Windsor, Canada, 1987 (546 rows).

    Returns `(X, y, feature_names)`: `X` is (546, 11) float64 with yes/no columns coded 1/0,
    `y` is (546,) the sale price in Canadian dollars.
    """
    with open(_path("housing.csv"), newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    names = header[2:]  # drop the row number and the price
    yes_no = {"yes": 1.0, "no": 0.0}
    X = np.array([[yes_no[v] if v in yes_no else float(v) for v in r[2:]] for r in body])
    y = np.array([float(r[1]) for r in body])
    return X, y, names


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """8x8 handwritten digits (1,797 images). Returns `(X, y)`: X (1797, 64) pixel values 0..16, y (1797,) int64."""
    with gzip.open(_path("digits.csv.gz"), "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    return data[:, :64], data[:, 64].astype(np.int64)


def load_sentiment() -> tuple[list[str], np.ndarray, list[str]]:
    """3,000 labelled review sentences. Returns `(texts, labels, sources)`; label 1 = positive, 0 = negative."""
    texts, labels, sources = [], [], []
    with open(_path("sentiment.tsv"), newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(reader)  # header: label, source, text
        for label, source, text in reader:
            labels.append(int(label))
            sources.append(source)
            texts.append(text)
    return texts, np.array(labels, dtype=np.int64), sources


def load_names() -> list[str]:
    """32,257 US first names (2018), lowercase a-z, one per entry, in the file's order."""
    return _path("names.txt").read_text().split()


def load_shakespeare() -> str:
    """Eight Shakespeare tragedies as one plain-ASCII string (1,158,233 characters)."""
    return _path("shakespeare.txt").read_text()


# ---- mini-batches ----------------------------------------------------------------------------------------------

@exercise("07-neural-nets", "batches")
def batches(*tensors: Tensor, batch_size: int, shuffle: bool = True, rng: np.random.Generator | None = None,
            drop_last: bool = False) -> Iterator[tuple[Tensor, ...]]:
    """One epoch of mini-batches over the rows of `tensors` (each with the same first dim N): a generator of
    tuples, one Tensor per input, holding the same rows of each. With shuffle, the rows come in the order of
    `rng.permutation(N)` (rng: teenygrad's generator when None), drawn when batches is called, so every call
    is a new epoch; else in order. Batches of `batch_size` rows; the last is shorter unless drop_last drops it.
    No tensors, first dims that differ, or batch_size < 1 -> ValueError, raised by the call itself."""
    if not tensors:
        raise ValueError("batches: give at least one tensor")
    n = tensors[0].shape[0] if tensors[0].ndim else None
    if n is None or any(t.ndim == 0 or t.shape[0] != n for t in tensors):
        raise ValueError(f"batches: every tensor needs the same first dim, got shapes {[t.shape for t in tensors]}")
    if batch_size < 1:
        raise ValueError(f"batches: batch_size must be at least 1, got {batch_size}")
    order = (rng or default_generator()).permutation(n) if shuffle else np.arange(n)  # drawn now, not at first use
    end = n - n % batch_size if drop_last else n

    def walk() -> Iterator[tuple[Tensor, ...]]:
        for start in range(0, end, batch_size):
            rows = Tensor(order[start:start + batch_size], dtype=int64)
            yield tuple(t.index_select(0, rows) for t in tensors)
    return walk()
