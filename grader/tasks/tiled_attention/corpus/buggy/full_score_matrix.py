# expect: memory
# bugs: several (whole rows of keys at once: online.key_streaming; the whole matrix: memory)
"""Right values, but the whole L×S score matrix at once: not tiled."""
import math

import torch


def tiled_attention(query, key, value, block_size):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    return torch.softmax(scores, dim=-1) @ value
