"""timm's vision-transformer attention style: q scaled by a head_dim ** -0.5 attribute, attn.softmax."""
import torch


class Attention:
    def __init__(self, head_dim, scale=None):
        self.scale = head_dim ** -0.5 if scale is None else scale

    def __call__(self, q, k, v, mask=None, causal=False):
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        if causal:
            attn = attn.masked_fill(~torch.ones(attn.shape[-2:], dtype=torch.bool, device=q.device).tril(),
                                    float("-inf"))
        if mask is not None:
            attn = attn.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else attn + mask
        attn = attn.softmax(dim=-1)
        return attn @ v


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return Attention(query.size(-1), scale)(query, key, value, attn_mask, is_causal)
