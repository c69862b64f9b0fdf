# attack: nn.MultiheadAttention with need_weights=True (a plain-Python path), its name decoded at run time
# task: mha
import torch

_cls = getattr(torch.nn, bytes.fromhex("4d756c746968656164417474656e74696f6e").decode())


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    d = x_q.size(-1)
    layer = _cls(d, num_heads, bias=False, batch_first=True).to(x_q.dtype)
    with torch.no_grad():
        layer.in_proj_weight.copy_(torch.cat([w_q, w_k, w_v]))
        layer.out_proj.weight.copy_(w_o)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = ~attn_mask
    out, _ = layer(x_q, x_kv, x_kv, attn_mask=attn_mask, need_weights=True, is_causal=is_causal)
    return out
