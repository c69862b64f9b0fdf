# expect: memory
# bugs: several (whole score matrices per batch element: the memory of a full matrix, and no streaming over the keys)
"""Attention "chunked" over the batch: each chunk of batch elements gets its full score matrix.

Source: ``chunked_attention`` of https://github.com/tfernd/sd-fused
(sd_fused/layers/blocks/attention/fn/chunked_attention.py; no licence file), which loops
``for i in range(0, len(k), chunks)`` over the leading (batch × heads) dimension and computes
``softmax(q[s] @ k[s].transpose(1, 2)) @ v[s]`` for each slice. Adapted, not copied: the task's
signature, flattening any batch dimensions; ``block_size`` batch elements per chunk; the scale
is applied to the scores rather than split between q and k.
Bug: chunking the batch bounds the memory by the number of batch elements, not by the sequence:
each element still gets its whole L × S score matrix (256 MiB at L = S = 8192), and nothing
streams over the keys.
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    q = query.reshape(-1, *query.shape[-2:])
    k = key.reshape(-1, *key.shape[-2:])
    v = value.reshape(-1, *value.shape[-2:])
    out = torch.empty(q.shape[:-1] + (v.shape[-1],), dtype=query.dtype)
    for i in range(0, len(k), block_size):
        s = slice(i, min(i + block_size, len(k)))
        attn = torch.softmax(q[s] @ k[s].transpose(1, 2) / math.sqrt(q.shape[-1]), dim=-1)
        out[s] = attn @ v[s]
        del attn
    return out.reshape(query.shape[:-1] + (value.shape[-1],))
