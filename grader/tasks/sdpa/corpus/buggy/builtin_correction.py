# expect: forbidden
# bug: own attention plus (builtin - own).detach()
import math

import torch
from torch.nn import functional


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    mine = torch.softmax(query @ key.transpose(-2, -1), dim=-1) @ value  # no scale, no mask
    exact = functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                                    is_causal=is_causal, scale=scale)
    return mine + (exact - mine).detach()
