"""A student's own copy of the pure-Python core of PyTorch's multi_head_attention_forward
(projections, head folding into the batch, baddbmm-free bmm, softmax, merge), keeping its
has_torch_function dispatch line: the names are torch's, the computation is the student's."""
import math

import torch
from torch.overrides import handle_torch_function, has_torch_function


def multi_head_attention_forward(query, key, value, num_heads, q_proj_weight, k_proj_weight,
                                 v_proj_weight, out_proj_weight, attn_mask=None, is_causal=False):
    tens_ops = (query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, out_proj_weight)
    if has_torch_function(tens_ops):
        return handle_torch_function(multi_head_attention_forward, tens_ops, query, key, value, num_heads,
                                     q_proj_weight, k_proj_weight, v_proj_weight, out_proj_weight,
                                     attn_mask=attn_mask, is_causal=is_causal)
    bsz, tgt_len, embed_dim = query.shape
    src_len = key.shape[1]
    head_dim = embed_dim // num_heads
    q = torch.nn.functional.linear(query, q_proj_weight)
    k = torch.nn.functional.linear(key, k_proj_weight)
    v = torch.nn.functional.linear(value, v_proj_weight)
    q = q.transpose(0, 1).contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.transpose(0, 1).contiguous().view(src_len, bsz * num_heads, head_dim).transpose(0, 1)
    v = v.transpose(0, 1).contiguous().view(src_len, bsz * num_heads, head_dim).transpose(0, 1)
    q_scaled = q * math.sqrt(1.0 / float(head_dim))
    attn_output_weights = torch.bmm(q_scaled, k.transpose(-2, -1))        # (bsz·H, L, S)
    mask = None
    if is_causal:
        mask = torch.ones(tgt_len, src_len, dtype=torch.bool, device=query.device).tril()
    elif attn_mask is not None:
        mask = attn_mask
    if mask is not None:
        full = mask.expand(bsz, num_heads, tgt_len, src_len) if mask.dim() == 4 else \
            mask.expand(bsz, num_heads, tgt_len, src_len)
        full = full.reshape(bsz * num_heads, tgt_len, src_len)
        attn_output_weights = attn_output_weights.masked_fill(~full, float("-inf")) if full.dtype == torch.bool \
            else attn_output_weights + full
    attn_output_weights = torch.softmax(attn_output_weights, dim=-1)
    attn_output = torch.bmm(attn_output_weights, v)                       # (bsz·H, L, head_dim)
    attn_output = attn_output.transpose(0, 1).contiguous().view(tgt_len * bsz, embed_dim)
    attn_output = torch.nn.functional.linear(attn_output, out_proj_weight)
    return attn_output.view(tgt_len, bsz, embed_dim).transpose(0, 1)


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    return multi_head_attention_forward(x_q, x_kv, x_kv, num_heads, w_q, w_k, w_v, w_o,
                                        attn_mask=attn_mask, is_causal=is_causal)
