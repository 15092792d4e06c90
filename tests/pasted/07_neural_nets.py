"""Exercise 7 answered with teenygrad's own pieces (each must score 0: see issue 12)."""
ANSWERS = {
    "modules": (
        "from teenygrad.nn import Module as _Theirs\n\n\n"
        "def named_modules(self, prefix=\"\"):\n"
        "    return _Theirs.named_modules(self, prefix)\n\n\n"
        "def named_parameters(self):\n"
        "    return _Theirs.named_parameters(self)\n\n\n"
        "def load_state_dict(self, state):\n"
        "    return _Theirs.load_state_dict(self, state)\n"),
    "kaiming": "from teenygrad.nn_init import kaiming_normal_, kaiming_uniform_\n",
    "dropout": (
        "from teenygrad.functional import dropout\n\n\n"
        "class Dropout(nn.Dropout):\n"
        "    def __init__(self, p=0.5):\n"
        "        nn.Dropout.__init__(self, p)\n\n"
        "    def forward(self, x):\n"
        "        return nn.Dropout.forward(self, x)\n"),
    "optimizer": (
        "from teenygrad.optim import Optimizer as _Theirs, collect_params\n\n\n"
        "def step(self):\n"
        "    return _Theirs.step(self)\n\n\n"
        "def zero_grad(self):\n"
        "    return _Theirs.zero_grad(self)\n"),
    "sgd_update": (
        "def sgd_update(p, g, buf, lr, momentum, weight_decay):\n"
        "    return optim.sgd_update(p, g, buf, lr, momentum, weight_decay)\n"),
    "adam_update": (
        "def adam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, t):\n"
        "    return optim.adam_update(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, t)\n"),
    "lr_at": "from teenygrad.optim import lr_at\n",
    "clip_grad_norm": (
        "from teenygrad.optim import clip_grad_norm as _theirs\n\n\n"
        "def clip_grad_norm(params, max_norm):\n"
        "    return _theirs(params, max_norm)\n"),
    "batches": "from teenygrad.datasets import batches\n",
    "xavier": "from teenygrad.nn_init import calculate_gain, fans, xavier_normal_, xavier_uniform_\n",
    "linear": (
        "from teenygrad.ops.fused import linear_backward\n\n\n"
        "class Linear(nn.Linear):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        nn.Linear.__init__(self, *args, **kwargs)\n\n"
        "    def forward(self, x):\n"
        "        return nn.Linear.forward(self, x)\n"),
    "embedding": (
        "from teenygrad.functional import embedding\n\n\n"
        "class Embedding(nn.Embedding):\n"
        "    def __init__(self, num_embeddings, embedding_dim, dtype=tg.float32):\n"
        "        nn.Embedding.__init__(self, num_embeddings, embedding_dim, dtype)\n\n"
        "    def forward(self, index):\n"
        "        return nn.Embedding.forward(self, index)\n"),
    "layer_norm": (
        "class LayerNorm(nn.LayerNorm):\n"
        "    def __init__(self, dim, eps=1e-5, bias=True, dtype=tg.float32):\n"
        "        super().__init__(dim, eps, bias, dtype)\n\n"
        "    def forward(self, x):\n"
        "        return super().forward(x)\n"),
    "rms_norm": (
        "class RMSNorm(nn.RMSNorm):\n"
        "    def __init__(self, dim, eps=1e-5, dtype=tg.float32):\n"
        "        nn.RMSNorm.__init__(self, dim, eps, dtype)\n\n"
        "    def forward(self, x):\n"
        "        return nn.RMSNorm.forward(self, x)\n"),
}
