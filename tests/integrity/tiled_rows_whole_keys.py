# attack: tiled_attention without streaming over the keys: one query row at a time, each with a softmax
# over its whole row of keys (no running maximum, no rescaling); its memory is that of one score row,
# no more than copies of the keys, so only making the keys block by block tells it apart
# task: tiled_attention
# expect: score<=40
import math

import torch


def tiled_attention(query, key, value, block_size):
    scale = 1 / math.sqrt(query.size(-1))
    rows = [torch.softmax(query[..., i:i + 1, :] @ key.transpose(-2, -1) * scale, dim=-1) @ value
            for i in range(query.size(-2))]
    return torch.cat(rows, dim=-2)
