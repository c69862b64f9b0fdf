"""A tutorial-style attention layer with its own backward: nn.Module, an identity projection.

Style: the layer most tutorials copy, ``self.proj = nn.Identity()`` kept as a placeholder for a
projection added later, and the attention itself as a method named scaled_dot_product_attention
(the author's own, not torch's). The backward is a second method; the task's function builds the
module and calls it. Nothing here is built-in attention.
"""
import math

import torch
from torch import nn


class AttentionWithBackward(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Identity()

    def scaled_dot_product_attention(self, q, k, attn_mask, is_causal, scale):
        scores = torch.matmul(q, k.transpose(-1, -2)) * scale
        if is_causal:
            L, S = scores.size(-2), scores.size(-1)
            future = torch.triu(torch.ones(L, S, dtype=torch.bool, device=q.device), diagonal=1)
            scores = scores.masked_fill(future, float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                scores = scores.masked_fill(attn_mask.logical_not(), float("-inf"))
            else:
                scores = scores + attn_mask
        return scores.softmax(dim=-1)

    def backward_pass(self, q, k, v, d_out, attn_mask=None, is_causal=False, scale=None):
        scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
        probs = self.scaled_dot_product_attention(q, k, attn_mask, is_causal, scale)
        d_out = self.proj(d_out)
        d_v = torch.matmul(probs.transpose(-1, -2), d_out)
        d_probs = torch.matmul(d_out, v.transpose(-1, -2))
        row_dot = (d_probs * probs).sum(dim=-1, keepdim=True)
        d_scores = probs * (d_probs - row_dot) * scale
        d_q = torch.matmul(d_scores, k)
        d_k = torch.matmul(d_scores.transpose(-1, -2), q)
        return d_q, d_k, d_v


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    return AttentionWithBackward().backward_pass(query, key, value, grad_out, attn_mask, is_causal, scale)
