"""Exercise 1 answered with teenygrad's own pieces: every part must score 0 (the pieces are withheld)."""
ANSWERS = {
    "ridge_gradient": "def ridge_gradient(X, y, w, lam):\n    return tg.regression.ridge_gradient(X, y, w, lam)\n",
    "closed_form": "from teenygrad.regression import fit_ridge, solve_spd\n",
    "gradient_descent": "import teenygrad.regression\n\n\ndef gradient_descent(loss, grad, w0, lr, max_steps=10_000, tol=1e-6):\n"
                        "    return teenygrad.regression.gradient_descent(loss, grad, w0, lr, max_steps, tol)\n",
    "standardize": "from teenygrad.preprocessing import standardize, unstandardize\n",
    "cross_validation": "def kfold_rmse(X, y, k, fit, seed=0):\n    return tg.regression.kfold_rmse(X, y, k, fit, seed)\n\n\n"
                        "def choose_lambda(X, y, lams, k, fit, seed=0):\n"
                        "    return tg.regression.choose_lambda(X, y, lams, k, fit, seed)\n",
}
