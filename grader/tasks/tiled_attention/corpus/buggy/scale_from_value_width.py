# expect: output
# bug: scales by 1/sqrt of the values' width instead of the keys'
"""The head size taken from the values: ``head_dim = value.shape[-1]``. Right whenever E = Ev.

Style: the running statistics as a small dict, updated per key block.
"""
import torch


def tiled_attention(query, key, value, block_size):
    head_dim = value.shape[-1]
    state = {"max": None, "sum": None, "out": None}
    for start in range(0, key.shape[-2], block_size):
        s = (query @ key[..., start:start + block_size, :].transpose(-2, -1)) / head_dim ** 0.5
        blk_max = s.amax(dim=-1, keepdim=True)
        if state["max"] is None:
            p = torch.exp(s - blk_max)
            state = {"max": blk_max, "sum": p.sum(-1, keepdim=True),
                     "out": p @ value[..., start:start + block_size, :]}
            continue
        new_max = torch.maximum(state["max"], blk_max)
        p = torch.exp(s - new_max)
        r = torch.exp(state["max"] - new_max)
        state = {"max": new_max, "sum": state["sum"] * r + p.sum(-1, keepdim=True),
                 "out": state["out"] * r + p @ value[..., start:start + block_size, :]}
    return state["out"] / state["sum"]
