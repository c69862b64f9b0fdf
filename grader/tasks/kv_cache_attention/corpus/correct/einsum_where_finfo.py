"""The whole preallocated cache attended, its rows after `position` hidden with the dtype's most
negative finite value; the new rows spliced in with torch.cat of slices.

Style: einsum, a validity mask from arange, torch.where instead of masked_fill.
"""
import torch


def kv_cache_attention(query, key, value, k_cache, v_cache, position):
    k_new = torch.cat([k_cache[:, :position], key, k_cache[:, position + 1:]], dim=1)
    v_new = torch.cat([v_cache[:, :position], value, v_cache[:, position + 1:]], dim=1)
    logits = torch.einsum("bqd,bnd->bqn", query, k_new) * query.shape[-1] ** -0.5
    valid = torch.arange(k_new.shape[1], device=query.device) <= position          # (N,)
    logits = torch.where(valid, logits, torch.finfo(logits.dtype).min)
    out = torch.einsum("bqn,bnd->bqd", logits.softmax(-1), v_new)
    return out, k_new, v_new
