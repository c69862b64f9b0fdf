# expect: batch
# bugs: several (flattening the batch also breaks the float mask's broadcast, which reads as a mask bug)
# bug: flattens the batch into the sequence
import math

import torch


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    L, S, E, Ev = query.size(-2), key.size(-2), query.size(-1), value.size(-1)
    q = query.expand(*batch, L, E).reshape(-1, E)
    k = key.expand(*batch, S, E).reshape(-1, E)
    v = value.expand(*batch, S, Ev).reshape(-1, Ev)
    n = q.size(0) // L
    scores = (q @ k.T) * scale  # (n*L, n*S): every query sees every batch element's keys
    if is_causal or attn_mask is not None:
        keep = torch.ones(L, S, dtype=torch.bool).tril() if is_causal else attn_mask.expand(*batch, L, S)
        if not is_causal and keep.dtype != torch.bool:
            keep = keep != float('-inf')
        full = torch.block_diag(*keep.reshape(-1, L, S)) if keep.dim() > 2 else torch.block_diag(*[keep] * n)
        scores = scores.masked_fill(~full, float('-inf'))
    return (torch.softmax(scores, -1) @ v).reshape(*batch, L, Ev)

