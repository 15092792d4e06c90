"""Chapter 4's piece of teenygrad: text as bag-of-words vectors, one-hot labels, accuracy and the measures
beyond it, and the mini-batch training loop of a softmax classifier.

Turning sentences into a matrix is input processing, so `tokenize` and `Vocabulary` are plain Python and
numpy (numpy is teenygrad's storage and I/O layer). `one_hot` and `accuracy` compute with teenygrad tensors;
chapter 4 builds each of them step by step. `fit_classifier` (mini-batch gradient descent with early stopping)
and `precision_recall_f1`, the first of the measures chapter 4 describes after its confusion matrix, are
exercise 4's; `top_k_accuracy` and `roc_auc` are the book's.
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from teenygrad.edition import exercise
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


@exercise("04-classification", "fit_classifier")
def fit_classifier(W: Tensor, X: Tensor, y: Tensor, X_val: Tensor, y_val: Tensor, lr: float, batch_size: int,
                   epochs: int, patience: int, seed: int) -> tuple[Tensor, dict]:
    """Softmax regression, scores $Z = XW$, trained by mini-batch gradient descent on the cross-entropy, with
    early stopping on the validation loss. Returns `(W_best, history)`.

    `W` (d, K): the starting weights; `X` (n, d) and int64 labels `y` (n,); `X_val`, `y_val` likewise, never
    trained on. All arithmetic is in `W`'s dtype. One generator `rng = np.random.default_rng(seed)` is made
    at the start; every epoch draws `rng.permutation(n)` and walks it in consecutive batches of `batch_size`
    rows (the last one shorter when `batch_size` does not divide n). For each batch B of b rows, at the current W:
    Z = X_B W, the batch loss is `Z.cross_entropy(y_B)` (its mean), and the step is chapter 4's gradient,
    W <- W - lr * X_B^T (softmax(Z) - Y_B) / b (Y_B one-hot).
    After the epoch, `history["train_loss"]` gets the mean over the epoch's rows of the batch losses (each batch
    weighted by b) and `history["val_loss"]` the cross-entropy of `X_val @ W` against `y_val`.

    Early stopping: an epoch *improves* when its validation loss is strictly below every earlier one (the
    first always does). Training stops after `epochs` epochs, or earlier, after the epoch that makes `patience`
    epochs in a row without improvement. `W_best` is W after the last improving epoch, and
    `history["best_epoch"]` its number (epochs count from 1). batch_size, epochs and patience must be >= 1."""
    if min(batch_size, epochs, patience) < 1:
        raise ValueError(f"fit_classifier: batch_size, epochs and patience must be at least 1, got "
                         f"{batch_size}, {epochs}, {patience}")
    n, K = X.shape[0], W.shape[1]
    rng = np.random.default_rng(seed)  # one generator for the whole run: the same seed, the same batches
    history: dict = {"train_loss": [], "val_loss": [], "best_epoch": 0}
    best_loss, best_W, waited = float("inf"), W, 0
    for epoch in range(1, epochs + 1):
        order = rng.permutation(n)
        total = 0.0
        for start in range(0, n, batch_size):
            rows = Tensor(order[start:start + batch_size])
            Xb, yb, b = X[rows], y[rows], rows.shape[0]
            Z = Xb @ W
            total += Z.cross_entropy(yb).item() * b  # the batch's loss at the W it steps from
            W = W - lr * (Xb.T @ (Z.softmax(axis=1) - one_hot(yb, K).to(W.dtype))) / b
        val_loss = (X_val @ W).cross_entropy(y_val).item()
        history["train_loss"].append(total / n)
        history["val_loss"].append(val_loss)
        if val_loss < best_loss:  # tensors are never changed in place: keeping a reference keeps these weights
            best_loss, best_W, waited, history["best_epoch"] = val_loss, W, 0, epoch
        else:
            waited += 1
            if waited >= patience:
                break
    return best_W, history


def _labels(y: Tensor | np.ndarray | Sequence[int], num_classes: int, what: str, op: str) -> np.ndarray:
    """A 1-D int64 array of labels in 0..num_classes-1, or one clear error."""
    values = (y.numpy() if isinstance(y, Tensor) else np.asarray(y))
    if values.ndim != 1:
        raise ValueError(f"{op}: {what} must be a 1-D vector of labels, got shape {values.shape}")
    if values.size and not np.issubdtype(values.dtype, np.integer):
        if not np.all(values == np.round(values)):
            raise ValueError(f"{op}: {what} must be whole numbers (class labels)")
    values = values.astype(np.int64)
    if values.size and (values.min() < 0 or values.max() >= num_classes):
        raise ValueError(f"{op}: {what} must lie in 0..{num_classes - 1}, got {values.min()}..{values.max()}")
    return values


@exercise("04-classification", "precision_recall_f1")
def precision_recall_f1(y_true: Tensor | np.ndarray | Sequence[int], y_pred: Tensor | np.ndarray | Sequence[int],
                        num_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per class k, from the confusion matrix C (rows: true class, columns: predicted class):
    $$\\text{precision}_k = \\frac{C_{kk}}{\\sum_a C_{ak}}, \\quad \\text{recall}_k = \\frac{C_{kk}}{\\sum_b C_{kb}},
      \\quad F_1 = \\frac{2 \\, \\text{precision}_k \\, \\text{recall}_k}{\\text{precision}_k + \\text{recall}_k}
      = \\frac{2 C_{kk}}{\\sum_b C_{kb} + \\sum_a C_{ak}},$$
    each 0 where its denominator is 0 (a class never predicted, or never present). Three float64 arrays of
    shape (num_classes,); the macro-F1 is the mean of the last."""
    t = _labels(y_true, num_classes, "y_true", "precision_recall_f1")
    p = _labels(y_pred, num_classes, "y_pred", "precision_recall_f1")
    if len(t) != len(p):
        raise ValueError(f"precision_recall_f1: {len(t)} true labels but {len(p)} predictions")
    C = one_hot(t, num_classes).to(float64).T @ one_hot(p, num_classes).to(float64)  # (K, K) counts
    hits = (C * (arange(num_classes) == arange(num_classes).reshape(num_classes, 1))).sum(axis=1)  # the diagonal
    present, predicted = C.sum(axis=1), C.sum(axis=0)
    # C_kk is 0 whenever a denominator is: dividing by max(denominator, 1) gives the 0 convention
    precision = hits / predicted.maximum(1.0)
    recall = hits / present.maximum(1.0)
    f1 = 2 * hits / (present + predicted).maximum(1.0)
    return precision.numpy(), recall.numpy(), f1.numpy()


def top_k_accuracy(logits: Tensor | np.ndarray, y: Tensor | np.ndarray | Sequence[int], k: int) -> float:
    """The fraction of examples whose true class is among the k highest-scoring classes. Ties are broken as
    argmax breaks them, towards the lower class index: class y_i is in the top k of row i when
    $$\\#\\{c : z_{ic} > z_{i y_i}\\} + \\#\\{c < y_i : z_{ic} = z_{i y_i}\\} < k .$$
    With k = 1 this is `accuracy`; with k >= the number of classes it is 1."""
    scores = _as_tensor(logits, float64)
    if scores.ndim != 2:
        raise ValueError(f"top_k_accuracy: logits must be (n, K), got shape {scores.shape}")
    n, K = scores.shape
    labels = _labels(y, K, "y", "top_k_accuracy")
    if len(labels) != n or n == 0:
        raise ValueError(f"top_k_accuracy: {n} rows of logits but {len(labels)} labels (need at least one)")
    if not (isinstance(k, (int, np.integer)) and k >= 1):
        raise ValueError(f"top_k_accuracy: k must be a positive integer, got {k!r}")
    classes = arange(K)
    target = Tensor(labels).reshape(n, 1)
    own = (scores * (classes == target)).sum(axis=1, keepdim=True)  # z_{i, y_i}, as a column
    ahead = (scores > own).sum(axis=1) + ((scores == own) * (classes < target)).sum(axis=1)
    return float((ahead < k).to(float64).mean().item())


def roc_auc(scores: Tensor | np.ndarray, y: Tensor | np.ndarray | Sequence[int]) -> float:
    """The area under the ROC curve of a binary scorer: the probability that a random positive example scores
    higher than a random negative one, a tie counting one half,
    $$\\mathrm{AUC} = \\frac{1}{PN} \\sum_{i: y_i = 1} \\sum_{j: y_j = 0} \\Big(\\mathbb{1}[s_i > s_j]
      + \\tfrac12 \\mathbb{1}[s_i = s_j]\\Big).$$
    Needs at least one positive and one negative label (else the ratio is undefined: a ValueError)."""
    s = _as_tensor(scores, float64)
    labels = _labels(y, 2, "y", "roc_auc")
    if s.ndim != 1 or s.shape[0] != len(labels):
        raise ValueError(f"roc_auc: scores of shape {s.shape} do not match {len(labels)} labels")
    positive, negative = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    if not len(positive) or not len(negative):
        raise ValueError("roc_auc: needs at least one positive and one negative example")
    sp = s[Tensor(positive)].reshape(len(positive), 1)  # a column against the row of negatives' scores
    sn = s[Tensor(negative)]
    wins = (sp > sn).to(float64) + 0.5 * (sp == sn).to(float64)
    return float(wins.mean().item())
