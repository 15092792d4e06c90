"""Exercise 1 answered with teenygrad's own pieces: every part must score 0 (the pieces are withheld)."""
ANSWERS = {
    "ridge_gradient": "def ridge_gradient(X, y, w, lam):\n    return tg.regression.ridge_gradient(X, y, w, lam)\n",
    "fit_ridge": "from teenygrad.regression import fit_ridge\n",
    "unstandardize": "import teenygrad.regression\n\n\ndef unstandardize(w, mean, std):\n"
                     "    return teenygrad.regression.unstandardize(w, mean, std)\n",
    "kfold_rmse": "def kfold_rmse(X, y, k, fit, seed=0):\n    return tg.regression.kfold_rmse(X, y, k, fit, seed)\n",
}
