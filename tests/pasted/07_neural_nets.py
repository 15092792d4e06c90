"""Exercise 7 answered with teenygrad's own pieces (each must score 0: see issue 12)."""
ANSWERS = {
    "kaiming": "from teenygrad.nn_init import kaiming_normal_, kaiming_uniform_\n",
    "adam_update": (
        "def adam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, t):\n"
        "    return optim.adam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, t)\n"),
    "clip_grad_norm": (
        "from teenygrad.optim import clip_grad_norm as _theirs\n\n\n"
        "def clip_grad_norm(params, max_norm):\n"
        "    return _theirs(params, max_norm)\n"),
}
