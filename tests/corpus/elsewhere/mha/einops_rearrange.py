"""lucidrains style without the einops dependency: heads folded with unflatten/movedim, einsum for the
scores, the mask broadcast over heads, and the softmax in float32."""
import torch


def multi_head_attention(x_q, x_kv, w_q, w_k, w_v, w_o, num_heads, attn_mask=None, is_causal=False):
    h = num_heads
    q, k, v = x_q @ w_q.T, x_kv @ w_k.T, x_kv @ w_v.T
    q, k, v = (t.unflatten(-1, (h, -1)).movedim(-2, 1) for t in (q, k, v))   # b h n d
    scale = q.shape[-1] ** -0.5
    sim = torch.einsum("bhid,bhjd->bhij", q, k) * scale
    mask_value = -torch.finfo(sim.dtype).max
    if is_causal:
        i, j = sim.shape[-2:]
        sim = sim.masked_fill(~torch.ones(i, j, dtype=torch.bool, device=sim.device).tril(), mask_value)
    if attn_mask is not None:
        sim = sim.masked_fill(~attn_mask, mask_value) if attn_mask.dtype == torch.bool else sim + attn_mask
    attn = sim.softmax(dim=-1, dtype=torch.float32).to(sim.dtype)
    out = torch.einsum("bhij,bhjd->bhid", attn, v)
    return out.movedim(1, -2).flatten(-2) @ w_o.T
