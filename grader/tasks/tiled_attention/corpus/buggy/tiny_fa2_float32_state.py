# expect: stability
"""FlashAttention-2's loops with the scores cast to float32 and the running sum made in float32.

Source: ``flash_attention_v2`` of https://github.com/66RING/tiny-flash-attention
(flash_attention_py/main_torch_only.py; MIT licence): ``qk = qk.float()`` ("use higher
precision to do softmax", meant for bfloat16 inputs) and ``global_sum = torch.zeros((block_m, 1))``
in the default dtype. Adapted, not copied: the task's signature and batch dimensions instead of a
loop over batch and heads; the tiles are ``block_size`` (32 × 64 in the original; see
correct/tiny_fa2_fixed_32x64.py); partial last tiles allowed; no causal branch.
Bug: for float64 inputs the scores, the running maximum and the normaliser are float32: the
float64 answer has float32's precision, and float64 scores beyond float32's range (about 1e40)
overflow to NaN where float64 attention is finite. float32 inputs are unaffected.
"""
import torch


def tiled_attention(query, key, value, block_size):
    seqlen, kvlen = query.shape[-2], key.shape[-2]
    sm_scale = query.shape[-1] ** -0.5
    o = torch.empty(query.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
    for q_start in range(0, seqlen, block_size):
        q_tile = query[..., q_start:q_start + block_size, :]
        global_score = torch.zeros(q_tile.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
        global_sum = torch.zeros(q_tile.shape[:-1] + (1,))
        global_max = torch.ones(q_tile.shape[:-1] + (1,)) * -torch.inf
        for kv_start in range(0, kvlen, block_size):
            k_tile = key[..., kv_start:kv_start + block_size, :]
            v_tile = value[..., kv_start:kv_start + block_size, :]
            qk = q_tile @ k_tile.transpose(-2, -1)
            qk = qk.float()
            qk = qk * sm_scale
            local_max = qk.max(dim=-1, keepdim=True).values
            new_max = torch.maximum(local_max, global_max)
            rescale = torch.exp(global_max - new_max)
            local_score = torch.exp(qk - new_max)
            local_sum = torch.sum(local_score, dim=-1, keepdim=True)
            global_sum = global_sum * rescale + local_sum
            global_score = global_score * rescale + local_score.to(query.dtype) @ v_tile
            global_max = new_max
        o[..., q_start:q_start + block_size, :] = global_score / global_sum
    return o
