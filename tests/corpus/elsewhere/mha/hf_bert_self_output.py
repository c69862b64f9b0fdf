"""Hugging Face BERT-style layer: transpose_for_scores, scores / sqrt(head size), an additive mask,
softmax, context layer permuted back and merged; projections applied like nn.Linear."""
import math

import torch
import torch.nn.functional as F


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    head_size = x_q.size(-1) // num_heads

    def transpose_for_scores(x):
        new_shape = x.size()[:-1] + (num_heads, head_size)
        return x.view(new_shape).permute(0, 2, 1, 3)

    query_layer = transpose_for_scores(F.linear(x_q, w_q))
    key_layer = transpose_for_scores(F.linear(x_kv, w_k))
    value_layer = transpose_for_scores(F.linear(x_kv, w_v))
    attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2)) / math.sqrt(head_size)
    if is_causal:
        L, S = attention_scores.shape[-2:]
        attn_mask = torch.ones(L, S, dtype=torch.bool, device=x_q.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_mask = torch.zeros(attn_mask.shape, dtype=attention_scores.dtype).masked_fill(
                ~attn_mask, torch.finfo(attention_scores.dtype).min)
        attention_scores = attention_scores + attn_mask
    attention_probs = F.softmax(attention_scores, dim=-1)
    context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
    context_layer = context_layer.view(context_layer.size()[:-2] + (num_heads * head_size,))
    return F.linear(context_layer, w_o)
