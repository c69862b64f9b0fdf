"""Rabe and Staats's "Self-attention does not need O(n²) memory": query chunks, key chunks summarised.

Source: ``efficient_dot_product_attention`` of
https://github.com/AminRezaei0x443/memory-efficient-attention (attention_torch.py; MIT licence),
as optimised by Alex Birch and shipped in AUTOMATIC1111/stable-diffusion-webui's
modules/sub_quadratic_attention.py. Adapted, not copied: the task's signature and any batch
dimensions; the key chunk is ``block_size`` and the query chunk 1024 rows; no checkpointing.
Why correct: each key chunk is summarised by its row maximum, its exp-weighted values and its
exp-weight sums (both relative to that maximum); the summaries are rescaled to the global
maximum over all chunks and added, and the sum of values is divided by the sum of weights:
softmax(QKᵀ/√E)V exactly, holding one query chunk × one key chunk of scores at a time plus one
summary per key chunk.
"""
import math

import torch

QUERY_CHUNK = 1024


def _summarize_chunk(query, key, value):
    attn_weights = query @ key.transpose(-2, -1)
    max_score = attn_weights.amax(dim=-1, keepdim=True).detach()
    exp_weights = torch.exp(attn_weights - max_score)
    exp_values = exp_weights @ value
    return exp_values, exp_weights.sum(dim=-1), max_score.squeeze(-1)


def _query_chunk_attention(query, key, value, kv_chunk_size):
    chunks = [_summarize_chunk(query, key[..., s:s + kv_chunk_size, :], value[..., s:s + kv_chunk_size, :])
              for s in range(0, key.shape[-2], kv_chunk_size)]
    chunk_values = torch.stack([c[0] for c in chunks])
    chunk_weights = torch.stack([c[1] for c in chunks])
    chunk_max = torch.stack([c[2] for c in chunks])
    global_max = chunk_max.amax(dim=0, keepdim=True)
    max_diffs = torch.exp(chunk_max - global_max)
    chunk_values = chunk_values * max_diffs.unsqueeze(-1)
    chunk_weights = chunk_weights * max_diffs
    return chunk_values.sum(dim=0) / chunk_weights.sum(dim=0).unsqueeze(-1)


def tiled_attention(query, key, value, block_size):
    query = query * (1 / math.sqrt(query.shape[-1]))
    return torch.cat([_query_chunk_attention(query[..., i:i + QUERY_CHUNK, :], key, value, block_size)
                      for i in range(0, query.shape[-2], QUERY_CHUNK)], dim=-2)
