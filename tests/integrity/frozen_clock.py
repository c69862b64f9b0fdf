# attack: the child's clock frozen so that every call seems to take no time
# task: sdpa
# expect: any
import math
import time

import torch

time.perf_counter = lambda: 0.0


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    for _ in range(20):  # twenty times the work: slow enough for any clock to see, and done within the limits
        scores = (query @ key.transpose(-2, -1)) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.softmax(scores, -1) @ value
