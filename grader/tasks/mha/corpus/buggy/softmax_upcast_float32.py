# expect: dtype
# bugs: several (the float32 weights make every float64 call raise, and the checks that call in float64 are charged, since they could not check)
"""The mixed-precision habit "softmax in float32" from float16 training code: F.softmax(...,
dtype=torch.float32). With float32 inputs nothing changes; with float64 inputs the weights are
float32 and the product with float64 values raises a dtype error.
"""
import math

import torch
import torch.nn.functional as F


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    B, L, D = x_q.shape
    S = x_kv.shape[1]
    dk = D // num_heads
    q = F.linear(x_q, w_q).reshape(B, L, num_heads, dk).transpose(1, 2)
    k = F.linear(x_kv, w_k).reshape(B, S, num_heads, dk).transpose(1, 2)
    v = F.linear(x_kv, w_v).reshape(B, S, num_heads, dk).transpose(1, 2)
    scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(dk)
    if is_causal:
        scores = scores + torch.full((L, S), float("-inf"), device=x_q.device).triu(1)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    probs = F.softmax(scores, dim=-1, dtype=torch.float32)
    out = torch.matmul(probs, v)
    return F.linear(out.transpose(1, 2).reshape(B, L, D), w_o)
