"""FlashAttention-2's loop order with fixed 32-query × 64-key tiles that ignore ``block_size``.

Source: ``flash_attention_v2`` of https://github.com/66RING/tiny-flash-attention
(flash_attention_py/main_torch_only.py; MIT licence). Adapted, not copied: the task's signature
and batch dimensions instead of (batch, seqlen, heads, dim) with a loop over batch and heads; no
causal branch; partial last tiles allowed (the original asserts that seqlen is a multiple of
both tiles); the running statistics take the inputs' dtype (the original casts the scores to
float32 and keeps the sum in float32: see buggy/tiny_fa2_float32_state.py).
Why correct: each 32-row query tile streams over the keys 64 at a time with a running maximum,
a rescaled sum and a rescaled unnormalised output, divided once at the end. ``block_size`` is
ignored, which the task allows: a 32 × 64 tile is a block of scores, never a row over all keys.
"""
import torch

BLOCK_M, BLOCK_N = 32, 64


def tiled_attention(query, key, value, block_size):
    seqlen, kvlen = query.shape[-2], key.shape[-2]
    sm_scale = query.shape[-1] ** -0.5
    o = torch.empty(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    for q_start in range(0, seqlen, BLOCK_M):
        q_tile = query[..., q_start:q_start + BLOCK_M, :]
        global_score = torch.zeros(q_tile.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
        global_sum = torch.zeros(q_tile.shape[:-1] + (1,), dtype=query.dtype)
        global_max = torch.full(q_tile.shape[:-1] + (1,), -torch.inf, dtype=query.dtype)
        for kv_start in range(0, kvlen, BLOCK_N):
            k_tile = key[..., kv_start:kv_start + BLOCK_N, :]
            v_tile = value[..., kv_start:kv_start + BLOCK_N, :]
            qk = q_tile @ k_tile.transpose(-2, -1) * sm_scale
            local_max = qk.max(dim=-1, keepdim=True).values
            new_max = torch.maximum(local_max, global_max)
            rescale = torch.exp(global_max - new_max)
            local_score = torch.exp(qk - new_max)
            global_sum = global_sum * rescale + local_score.sum(dim=-1, keepdim=True)
            global_score = global_score * rescale + local_score @ v_tile
            global_max = new_max
        o[..., q_start:q_start + BLOCK_M, :] = global_score / global_sum
    return o
