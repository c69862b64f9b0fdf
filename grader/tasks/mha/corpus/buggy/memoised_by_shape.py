# expect: output
# bugs: several (stale answers break whichever checks repeat a shape; no variant of attention explains them)
# bug: caches the layer's output by the shapes of its inputs
import math

import torch

_CACHE = {}


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    key = (tuple(x_q.shape), tuple(x_kv.shape), num_heads, is_causal, attn_mask is None, x_q.dtype)
    if key in _CACHE:
        return _CACHE[key].clone()
    B, L, D = x_q.shape
    S, d_k = x_kv.size(1), D // num_heads
    split = lambda x, T: x.reshape(B, T, num_heads, d_k).transpose(1, 2)
    q, k, v = split(x_q @ w_q.T, L), split(x_kv @ w_k.T, S), split(x_kv @ w_v.T, S)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if is_causal:
        scores = scores.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool else scores + attn_mask
    out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, L, D) @ w_o.T
    _CACHE[key] = out.detach()
    return out
