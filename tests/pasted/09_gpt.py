"""Exercise 9 answered with teenygrad's own pieces (each must score 0: see issue 12)."""
ANSWERS = {
    "model": (
        "from teenygrad import gpt\n\n"
        "attention_forward = gpt.CausalSelfAttention.forward\n"
        "mlp_forward = gpt.MLP.forward\n"
        "block_forward = gpt.Block.forward\n"
        "gpt_forward = gpt.GPT.forward\n\n\n"
        "def init_weights(self):\n"
        "    return gpt.GPT.init_weights(self)\n"),
    "gelu": (
        "from teenygrad.kernels import KERNELS\n"
        "from teenygrad.kernels.elementwise import gelu_backward_strided as _backward\n\n\n"
        "def gelu_strided(shape, x, x_strides, x_offset, out):\n"
        "    KERNELS['gelu'](shape, x, x_strides, x_offset, out)\n\n\n"
        "def gelu_backward_strided(shape, x, x_strides, x_offset, g, g_strides, g_offset, out):\n"
        "    _backward(shape, x, x_strides, x_offset, g, g_strides, g_offset, out)\n"),
    "layer_norm_backward": (
        "from teenygrad.ops.fused import RULES\n\n\n"
        "def layer_norm_backward(ctx, g):\n"
        "    return RULES['layer_norm'](ctx, g)\n"),
    "rms_norm_backward": (
        "from teenygrad.ops import RULES\n\n\n"
        "def rms_norm_backward(ctx, g):\n"
        "    return RULES['rms_norm'](ctx, g)\n"),
    "attention_backward": "from teenygrad.ops.fused import attention_backward\n",
    "cached_attention": (
        "def cached_attention(qkv, k_cache, v_cache, start, n_head):\n"
        "    return F.cached_attention(qkv, k_cache, v_cache, start, n_head)\n"),
    "generate": (
        "from teenygrad import gpt\n\n"
        "next_token = gpt.next_token\n\n\n"
        "def generate(self, idx, max_new_tokens, temperature=1.0, rng=None, use_cache=True):\n"
        "    return gpt.GPT.generate(self, idx, max_new_tokens, temperature, rng, use_cache)\n"),
}
