"""Exercise 4 answered with teenygrad's own pieces (imported, called, aliased): every part must score 0."""
ANSWERS = {
    "precision_recall_f1": "from teenygrad.classification import precision_recall_f1\n",
    "top_k_accuracy": (
        "import teenygrad.classification as C\n\n\n"
        "def top_k_accuracy(logits, y, k):\n"
        "    return C.top_k_accuracy(logits, y, k)\n"),
    "roc_auc": (
        "from teenygrad import classification\n\n"
        "_book = classification.roc_auc\n\n\n"
        "def roc_auc(scores, y):\n"
        "    return _book(scores, y)\n"),
}
