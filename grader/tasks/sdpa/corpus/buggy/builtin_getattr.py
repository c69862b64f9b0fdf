# expect: forbidden
# bug: reaches the built-in through getattr with a computed name
import torch

_NAME = "".join(["scaled", "_dot", "_product", "_attention"])


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    fn = getattr(torch.nn.functional, _NAME)
    return fn(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
