"""Each block's own softmax output and log-sum-exp, merged in log space."""
import math

import torch


def tiled_attention(query, key, value, block_size):
    out, lse = None, None
    for k, v in zip(torch.split(key, block_size, dim=-2), torch.split(value, block_size, dim=-2)):
        s = torch.einsum("...le,...se->...ls", query, k) / math.sqrt(query.shape[-1])
        block_lse = torch.logsumexp(s, dim=-1, keepdim=True)
        block_out = torch.einsum("...ls,...sv->...lv", torch.exp(s - block_lse), v)
        if out is None:
            out, lse = block_out, block_lse
            continue
        new_lse = torch.logaddexp(lse, block_lse)
        out = torch.exp(lse - new_lse) * out + torch.exp(block_lse - new_lse) * block_out
        lse = new_lse
    return out
