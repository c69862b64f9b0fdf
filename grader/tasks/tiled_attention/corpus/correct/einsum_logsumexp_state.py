"""The running state kept as a log-sum-exp instead of (max, sum): each key block's output is
normalised on its own and merged with the previous ones by their log-weights.

Style: einsum with named axes, torch.logaddexp for the merge (the memory-efficient-attention papers'
formulation).
"""
import torch


def tiled_attention(query, key, value, block_size):
    scale = query.shape[-1] ** -0.5
    out, lse = None, None
    for keys, values in zip(key.split(block_size, dim=-2), value.split(block_size, dim=-2)):
        logits = torch.einsum("...qd,...kd->...qk", query, keys) * scale
        block_lse = torch.logsumexp(logits, dim=-1, keepdim=True)
        block_out = torch.einsum("...qk,...kd->...qd", torch.exp(logits - block_lse), values)
        if out is None:
            out, lse = block_out, block_lse
            continue
        new_lse = torch.logaddexp(lse, block_lse)
        out = torch.exp(lse - new_lse) * out + torch.exp(block_lse - new_lse) * block_out
        lse = new_lse
    return out
