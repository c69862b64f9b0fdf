# expect: output
"""FlashAttention-2's loops with the number of key blocks rounded down: the last partial block is lost.

Source: ``flash_attn_v2`` of https://github.com/66RING/tiny-flash-attention
(flash_attention-py/tiny_flash_attn.py; MIT licence), which counts its blocks with
``k_block_num = k.shape[-2] // BLOCK_M`` (and the query blocks the same way). Adapted, not copied:
the task's signature and batch dimensions; ``BLOCK_M`` is ``block_size``; the query blocks are
counted with a ceiling so that only the key side keeps the slip; the buffers take the inputs'
dtype; the scores are scaled.
Bug: floor division drops the last ``S mod block_size`` keys whenever block_size does not divide
S, so those keys get no weight (the online softmax itself is right).
"""
import math

import torch


def tiled_attention(query, key, value, block_size):
    BLOCK_M = block_size
    scale = 1 / math.sqrt(query.shape[-1])
    Q_BLOCKS = torch.split(query, BLOCK_M, dim=-2)
    K_BLOCKS = torch.split(key, BLOCK_M, dim=-2)
    V_BLOCKS = torch.split(value, BLOCK_M, dim=-2)
    O_BLOCKS = []
    for qi in Q_BLOCKS:
        old_o = torch.zeros(qi.shape[:-1] + (value.shape[-1],), dtype=query.dtype)
        old_d = torch.zeros(qi.shape[:-1] + (1,), dtype=query.dtype)
        old_m = torch.full(qi.shape[:-1] + (1,), -torch.inf, dtype=query.dtype)
        k_block_num = key.shape[-2] // BLOCK_M
        for i in range(k_block_num):
            x_qkt = qi @ K_BLOCKS[i].transpose(-2, -1) * scale
            local_m = torch.max(x_qkt, dim=-1).values[..., None]
            new_m = torch.maximum(old_m, local_m)
            safe_e = torch.exp(x_qkt - new_m)
            curr_d = torch.sum(safe_e, dim=-1)[..., None]
            new_d = old_d * torch.exp(old_m - new_m) + curr_d
            new_o = old_o * torch.exp(old_m - new_m) + safe_e @ V_BLOCKS[i]
            old_m, old_d, old_o = new_m, new_d, new_o
        O_BLOCKS.append(old_o / old_d)
    return torch.cat(O_BLOCKS, dim=-2)
