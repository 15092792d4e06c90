"""Judge for assignment 04-classification: the measures beyond accuracy (exercises/04-classification.ipynb).

The learner writes three functions of `teenygrad.classification`; the hidden tests install them and call them
through the package (`teenygrad.classification.precision_recall_f1(...)` and so on). Every part is compared with
a float64 numpy reference written here, loop by loop from the definitions. The cases mix ordinary random inputs
with the ones that break careless code: classes that are never present or never predicted (0/0), a single
example, a single class, ties between scores, every label the same.

  precision_recall_f1  (y_true, y_pred, num_classes) -> (precision, recall, f1), three (num_classes,) arrays
  top_k_accuracy       (logits, y, k)                -> the fraction whose true class is in the top k
  roc_auc              (scores, y)                   -> the AUC, or -1 when the hidden test caught the
                                                        ValueError the part asks for (one class only)
"""
from __future__ import annotations

import numpy as np

from autograder.judges import Case, Part

# --- precision, recall, F1 ------------------------------------------------------------------------------------

def _prf(y_true: np.ndarray, y_pred: np.ndarray, num_classes: int):
    K = int(num_classes)
    precision, recall, f1 = np.zeros(K), np.zeros(K), np.zeros(K)
    for k in range(K):
        tp = np.sum((y_true == k) & (y_pred == k))
        fp = np.sum((y_true != k) & (y_pred == k))
        fn = np.sum((y_true == k) & (y_pred != k))
        precision[k] = tp / (tp + fp) if tp + fp else 0.0
        recall[k] = tp / (tp + fn) if tp + fn else 0.0
        both = precision[k] + recall[k]
        f1[k] = 2 * precision[k] * recall[k] / both if both else 0.0
    return precision, recall, f1


def _prf_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, K in [(1, 1), (1, 3), (10, 2), (50, 4), (200, 10), (30, 6)]:
        y = rng.integers(0, K, size=n)
        pred = np.where(rng.random(n) < 0.6, y, rng.integers(0, K, size=n))  # mostly right
        cases.append((y, pred, K))
    y = rng.integers(0, 3, size=40)  # classes 3 and 4 never present; 4 also never predicted
    pred = np.where(rng.random(40) < 0.5, y, 3)
    cases.append((y, pred, 5))
    y = rng.integers(0, 3, size=25)
    cases.append((y, np.where(y == 2, 0, y), 3))  # class 2 present but never predicted: recall 0, precision 0/0
    y = rng.integers(0, 4, size=20)
    cases.append((y, y.copy(), 4))  # perfect
    cases.append((y, (y + 1) % 4, 4))  # all wrong
    return cases


# --- top-k accuracy -------------------------------------------------------------------------------------------

def _top_k(logits: np.ndarray, y: np.ndarray, k: int) -> np.ndarray:
    hits = 0
    for row, label in zip(logits, y.tolist()):
        ahead = sum(1 for c, z in enumerate(row) if z > row[label] or (z == row[label] and c < label))
        hits += ahead < k
    return np.asarray(hits / len(y))


def _top_k_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n, K, k in [(1, 1, 1), (1, 5, 2), (10, 3, 1), (40, 10, 3), (25, 6, 6), (15, 4, 9), (60, 8, 2)]:
        cases.append((rng.normal(size=(n, K)), rng.integers(0, K, size=n), k))
    for k in [1, 2, 3]:  # scores from a few integers: ties everywhere
        cases.append((rng.integers(0, 3, size=(30, 5)).astype(np.float64), rng.integers(0, 5, size=30), k))
    cases.append((np.zeros((4, 3)), np.array([0, 1, 2, 0]), 2))  # all tied: the lower classes win
    cases.append((rng.normal(size=(12, 4)) * 1e300, rng.integers(0, 4, size=12), 2))  # huge scores
    return cases


# --- ROC AUC --------------------------------------------------------------------------------------------------

def _auc(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    pos, neg = scores[y == 1], scores[y == 0]
    if not len(pos) or not len(neg):
        return np.asarray(-1.0)
    wins = sum((p > q) + 0.5 * (p == q) for p in pos.tolist() for q in neg.tolist())
    return np.asarray(wins / (len(pos) * len(neg)))


def _auc_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for n in [2, 5, 40, 300]:
        y = rng.integers(0, 2, size=n)
        y[0], y[-1] = 0, 1  # both classes present
        cases.append((rng.normal(size=n) + y, y))
    y = rng.integers(0, 2, size=50)
    cases.append((rng.integers(0, 3, size=50).astype(np.float64), y))  # ties
    cases.append((np.full(6, 0.5), np.array([0, 1, 0, 1, 1, 0])))  # all tied: 1/2
    cases.append((np.array([-1e308, 1e308, 0.0, -5.0]), np.array([0, 1, 1, 0])))  # extremes
    cases.append((np.arange(8.0), (np.arange(8) < 4).astype(np.int64)))  # perfectly reversed: 0
    cases.append((rng.normal(size=5), np.ones(5, dtype=np.int64)))  # one class only: the ValueError
    return cases


PARTS = {
    "precision_recall_f1": Part(cases=_prf_cases, reference=_prf, rtol=1e-12, atol=1e-12),
    "top_k_accuracy": Part(cases=_top_k_cases, reference=_top_k, rtol=0.0, atol=1e-12),
    "roc_auc": Part(cases=_auc_cases, reference=_auc, rtol=1e-12, atol=1e-12),
}
