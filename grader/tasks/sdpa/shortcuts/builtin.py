"""The reference solution with torch's built-in attention swapped in (attn-grader tasks validate: refused)."""
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
