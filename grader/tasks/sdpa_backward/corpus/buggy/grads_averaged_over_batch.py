# expect: output
# bug: divides dQ and dK by the batch size, as if the loss were a mean over the batch
"""A training-script habit carried into the backward: "the loss is averaged over the batch", so the
query and key gradients are divided by the batch size. dV is left alone, which makes it inconsistent.

Style: explicit names per step, batch size read from the first dimension.
"""
import math

import torch


def scaled_dot_product_attention_backward(query, key, value, grad_out, attn_mask=None, is_causal=False,
                                          scale=None):
    batch = query.shape[0]
    sm_scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = torch.matmul(query, key.transpose(-2, -1)) * sm_scale
    if is_causal:
        L, S = scores.shape[-2], scores.shape[-1]
        scores = scores.masked_fill(torch.ones(L, S, dtype=torch.bool, device=scores.device).triu(1),
                                    float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    attn = torch.softmax(scores, dim=-1)

    grad_value = torch.matmul(attn.transpose(-2, -1), grad_out)
    grad_attn = torch.matmul(grad_out, value.transpose(-2, -1))
    grad_scores = attn * (grad_attn - (grad_attn * attn).sum(-1, keepdim=True))
    grad_query = torch.matmul(grad_scores, key) * sm_scale / batch
    grad_key = torch.matmul(grad_scores.transpose(-2, -1), query) * sm_scale / batch
    return grad_query, grad_key, grad_value
