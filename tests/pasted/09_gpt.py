"""Exercise 9 answered with teenygrad's own pieces (each must score 0: see issue 12)."""
ANSWERS = {
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
        "causal_attention = F.causal_attention\n\n\n"
        "def cached_attention(qkv, k_cache, v_cache, start, n_head):\n"
        "    return F.cached_attention(qkv, k_cache, v_cache, start, n_head)\n"),
    "generate": (
        "from teenygrad import gpt\n\n"
        "next_token = gpt.next_token\n\n\n"
        "def generate(self, idx, max_new_tokens, temperature=1.0, rng=None, use_cache=True):\n"
        "    return gpt.GPT.generate(self, idx, max_new_tokens, temperature, rng, use_cache)\n"),
}
