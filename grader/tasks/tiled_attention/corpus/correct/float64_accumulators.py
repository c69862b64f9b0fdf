import math

import torch


def tiled_attention(query, key, value, block_size):
    q = query.double() / math.sqrt(query.shape[-1])
    running_max = None
    for start in range(0, key.shape[-2], block_size):
        stop = min(start + block_size, key.shape[-2])
        scores = q @ key[..., start:stop, :].double().transpose(-2, -1)
        block_max = scores.amax(-1, keepdim=True)
        if running_max is None:
            running_max = block_max
            weights = torch.exp(scores - running_max)
            denom = weights.sum(-1, keepdim=True)
            numer = weights @ value[..., start:stop, :].double()
            continue
        new_max = torch.maximum(running_max, block_max)
        shrink = torch.exp(running_max - new_max)
        weights = torch.exp(scores - new_max)
        denom = denom * shrink + weights.sum(-1, keepdim=True)
        numer = numer * shrink + weights @ value[..., start:stop, :].double()
        running_max = new_max
    return (numer / denom).to(query.dtype)
