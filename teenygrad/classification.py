"""Chapter 4's piece of teenygrad: text as bag-of-words vectors, one-hot labels, and accuracy.

Turning sentences into a matrix is input processing, so `tokenize` and `Vocabulary` are plain Python and
numpy (numpy is teenygrad's storage and I/O layer). `one_hot` and `accuracy` compute with teenygrad tensors.
Chapter 4 builds each of them step by step.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from teenygrad.tensor import Tensor, arange, float32, float64, int64

_TOKEN = re.compile(r"[a-z0-9']+")


def tokenize(text: str) -> list[str]:
    """Lower-case `text` and split it into words: maximal runs of the letters a-z, the digits 0-9 and the
    apostrophe. Everything else (spaces, punctuation) separates words: `"Great phone!!"` -> `["great", "phone"]`."""
    return _TOKEN.findall(text.lower())


class Vocabulary:
    """The words a bag-of-words model knows, learned from training texts only.

    `fit` counts, for every word $w$, its *document frequency* $\\mathrm{df}(w)$, the number of training texts
    that contain it at least once, and keeps the words with $\\mathrm{df}(w) \\ge$ `min_count`, sorted
    alphabetically (so the same texts always give the same columns). `transform` maps text $i$ to row $i$ of
    a matrix with one column per known word:
    $$X_{ij} = \\mathbb{1}[\\text{word } j \\text{ occurs in text } i] \\quad \\text{(binary)}, \\qquad
      X_{ij} = \\#\\{\\text{occurrences of word } j \\text{ in text } i\\} \\quad \\text{(counts)}.$$
    Words that were not kept are ignored, so a text of unknown words becomes a row of zeros.
    """

    def __init__(self, min_count: int = 1) -> None:
        if min_count < 1:
            raise ValueError(f"min_count must be at least 1, got {min_count}")
        self.min_count = min_count
        self.words: list[str] = []
        self.index: dict[str, int] = {}

    def fit(self, texts: Iterable[str]) -> Vocabulary:
        """Learn the words from `texts` (the training set); returns `self`."""
        df = Counter(word for text in texts for word in set(tokenize(text)))
        self.words = sorted(word for word, count in df.items() if count >= self.min_count)
        self.index = {word: j for j, word in enumerate(self.words)}
        return self

    def __len__(self) -> int:
        return len(self.words)

    def transform(self, texts: Sequence[str], binary: bool = True) -> np.ndarray:
        """The (len(texts), len(self)) float32 bag-of-words matrix (presence if `binary`, else counts)."""
        X = np.zeros((len(texts), len(self.words)), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in tokenize(text):
                j = self.index.get(word)
                if j is not None:
                    X[i, j] = 1.0 if binary else X[i, j] + 1.0
        return X

    def fit_transform(self, texts: Sequence[str], binary: bool = True) -> np.ndarray:
        """`fit(texts)` then `transform(texts, binary)`."""
        return self.fit(texts).transform(texts, binary)


def _as_tensor(x: Tensor | np.ndarray | Sequence, dtype: object = None) -> Tensor:
    return x if isinstance(x, Tensor) and (dtype is None or x.dtype == dtype) else Tensor(
        x.numpy() if isinstance(x, Tensor) else np.asarray(x), dtype=dtype)


def one_hot(y: Tensor | np.ndarray | Sequence[int], num_classes: int) -> Tensor:
    """The (n, K) float32 matrix $Y$ with $Y_{ik} = 1$ if $y_i = k$ and 0 otherwise ($K$ = `num_classes`).

    Computed as one broadcast comparison of the labels, as a column, with the row $0, 1, \\dots, K-1$.
    Labels must be integers in $0, \\dots, K-1$.
    """
    labels = _as_tensor(y, int64)
    if labels.ndim != 1:
        raise ValueError(f"one_hot: expected a 1-D vector of labels, got shape {labels.shape}")
    values = labels.numpy()
    if values.size and (values.min() < 0 or values.max() >= num_classes):
        raise ValueError(f"one_hot: labels must lie in 0..{num_classes - 1}, got {values.min()}..{values.max()}")
    return (arange(num_classes) == labels.reshape(len(values), 1)).to(float32)


def accuracy(logits: Tensor | np.ndarray, y: Tensor | np.ndarray | Sequence[int]) -> float:
    """The fraction of examples whose predicted class is the true one,
    $\\frac{1}{n} \\sum_i \\mathbb{1}[\\hat y_i = y_i]$.

    `logits` (n, K): the prediction is the class with the largest score, $\\hat y_i = \\arg\\max_k z_{ik}$ (the
    first one on a tie). `logits` (n,), one score per example of a binary classifier: $\\hat y_i = 1$ when
    $z_i > 0$, that is when $\\sigma(z_i) > 1/2$, else 0.
    """
    scores = _as_tensor(logits)
    labels = _as_tensor(y, int64)
    if scores.ndim not in (1, 2) or labels.ndim != 1 or scores.shape[0] != labels.shape[0]:
        raise ValueError(f"accuracy: logits of shape {scores.shape} do not match labels of shape {labels.shape}")
    if labels.shape[0] == 0:
        raise ValueError("accuracy: no examples")
    predicted = scores.argmax(axis=1) if scores.ndim == 2 else (scores > 0).to(int64)
    return float((predicted == labels).to(float64).mean().item())
