# attack: a plain alias of torch.nn.functional hides the built-in from an identifier scan
# task: sdpa
import torch

nnf = torch.nn.functional


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return nnf.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal,
                                            scale=scale)
