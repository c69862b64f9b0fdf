# attack: tiled_attention without streaming over the keys: one query row at a time, each with a softmax
# over its whole row of keys (no running maximum, no rescaling); its memory is that of one score row,
# no more than copies of the keys, so only making the keys block by block tells it apart
# task: tiled_attention
# expect: score<=40
# levels: auto
import math

import torch


def tiled_attention(query, key, value, block_size):
    scale = 1 / math.sqrt(query.size(-1))
    keys_t, values = key.transpose(-2, -1), value + 0  # every key and value, once
    rows = [torch.softmax(query[..., i:i + 1, :] @ keys_t * scale, dim=-1) @ values
            for i in range(query.size(-2))]
    return torch.cat(rows, dim=-2)
