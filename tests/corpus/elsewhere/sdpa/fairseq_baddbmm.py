"""fairseq style: batch and heads flattened into one dimension, q scaled in place on a copy,
torch.bmm, and a float mask built once for the (B·H) layout."""
import torch
import torch.nn.functional as F


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    *batch, L, E = query.shape
    S, Ev = key.shape[-2], value.shape[-1]
    batch = torch.broadcast_shapes(tuple(batch), key.shape[:-2], value.shape[:-2])
    q = query.expand(*batch, L, E).reshape(-1, L, E)
    k = key.expand(*batch, S, E).reshape(-1, S, E)
    v = value.expand(*batch, S, Ev).reshape(-1, S, Ev)
    scaling = E ** -0.5 if scale is None else scale
    q = q * scaling
    attn_weights = torch.bmm(q, k.transpose(1, 2))                      # (N, L, S)
    if is_causal:
        attn_weights = attn_weights.masked_fill(
            ~torch.ones(L, S, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    if attn_mask is not None:
        mask = attn_mask.expand(*batch, L, S).reshape(-1, L, S)
        attn_weights = attn_weights.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool \
            else attn_weights + mask
    attn_probs = F.softmax(attn_weights, dim=-1)
    return torch.bmm(attn_probs, v).reshape(*batch, L, Ev)
