# honest: torch.compile around the core of attention (the sandbox runs it through TorchDynamo's eager backend)
import math
import torch


@torch.compile
def _attend(q, k, v, mask):
    s = q @ k.transpose(-2, -1)
    s = s.masked_fill(~mask, float("-inf")) if mask is not None else s
    return torch.softmax(s, dim=-1) @ v


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    L, S = query.size(-2), key.size(-2)
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        bias = bias.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=query.device).tril(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(~attn_mask, float("-inf"))
        else:
            bias = bias + attn_mask
    s = query @ key.transpose(-2, -1) * scale + bias
    return torch.softmax(s, dim=-1) @ value
