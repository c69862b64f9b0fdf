# expect: forbidden
# bug: wraps nn.MultiheadAttention
import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    D = x_q.size(-1)
    layer = torch.nn.MultiheadAttention(D, num_heads, bias=False, batch_first=True).to(x_q.dtype)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        layer.out_proj.weight.copy_(w_o)
    mask = None if attn_mask is None else (~attn_mask if attn_mask.dtype == torch.bool else -attn_mask)
    return layer(x_q, x_kv, x_kv, attn_mask=mask, need_weights=False, is_causal=is_causal)[0]
