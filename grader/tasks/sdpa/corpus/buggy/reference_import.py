# expect: forbidden
# bug: imports the course's reference
import importlib


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    ref = importlib.import_module("reference_impl")
    return ref.scaled_dot_product_attention(query, key, value, attn_mask, is_causal=is_causal, scale=scale)
