"""Exercise 4 answered with teenygrad's own pieces (imported, called, aliased): every part must score 0."""
ANSWERS = {
    "softmax": (
        "from teenygrad.kernels import softmax as _sm\n\n\n"
        "def softmax_rows(x, x_offset, M, sm, N, sn, out, log):\n"
        "    return _sm.softmax_rows(x, x_offset, M, sm, N, sn, out, log)\n\n\n"
        "softmax_backward = _sm.softmax_backward\n"
        "log_softmax_backward = _sm.log_softmax_backward\n"),
    "cross_entropy": "from teenygrad.kernels.loss import cross_entropy, cross_entropy_backward\n",
    "fit_classifier": (
        "import teenygrad.classification as C\n\n\n"
        "def fit_classifier(W, X, y, X_val, y_val, lr, batch_size, epochs, patience, seed):\n"
        "    return C.fit_classifier(W, X, y, X_val, y_val, lr, batch_size, epochs, patience, seed)\n"),
    "precision_recall_f1": "from teenygrad.classification import precision_recall_f1\n",
}
