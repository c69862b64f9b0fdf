# malformed: returns NaN everywhere (and claims the right shape)
# expect: wrong
import torch


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return torch.full(q.shape[:-1] + v.shape[-1:], float("nan"))
