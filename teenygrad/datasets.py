"""The book's data sets (chapter 1 onwards), shipped inside the package so nothing is downloaded at run time.

Sources and credits are in `teenygrad/data/DATA.md`. Every loader returns plain numpy arrays or Python
strings: numpy is teenygrad's storage and I/O layer.
"""
from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np

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
