# attack: tiled_attention without streaming over the keys: chunks of 64 query rows, each with a softmax
# over whole rows of keys; block_size is used, but for the queries
# task: tiled_attention
# expect: score<=40
# levels: auto
import math

import torch


def tiled_attention(query, key, value, block_size):
    scale = 1 / math.sqrt(query.size(-1))
    chunks = [torch.softmax(query[..., i:i + 64, :] @ key.transpose(-2, -1) * scale, dim=-1) @ value
              for i in range(0, query.size(-2), 64)]
    return torch.cat(chunks, dim=-2)
