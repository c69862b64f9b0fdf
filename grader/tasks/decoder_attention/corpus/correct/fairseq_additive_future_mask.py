"""fairseq's MultiheadAttention conventions: time-first inputs, an additive future mask and a key padding mask.

Source: https://github.com/facebookresearch/fairseq (fairseq/models/transformer/transformer_decoder.py:
``buffered_future_mask`` = ``torch.triu(utils.fill_with_neg_inf(torch.zeros([dim, dim])), 1)``;
fairseq/modules/multihead_attention.py: ``q *= self.scaling``, ``torch.bmm`` over (B·H, T, d),
``attn_weights += attn_mask`` and ``masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2)
.to(torch.bool), float("-inf"))``), MIT licence. Adapted, not copied: no projections, one head;
the key padding masks (True = pad) from the lengths; fairseq's softmax in float32 is left out (it
would round float64 inputs to float32); padded rows zeroed.
Why correct: the future mask adds -inf above the diagonal and 0 elsewhere; the key padding mask
hides padded keys; scaling q first is the same 1/√d; no row is fully masked.
"""
import torch
import torch.nn.functional as F


def fill_with_neg_inf(t):
    return t.float().fill_(float("-inf")).type_as(t)


def _attention(query, key, key_padding_mask, attn_mask=None):
    tgt_len, bsz, embed_dim = query.size()
    src_len = key.size(0)
    num_heads, head_dim = 1, embed_dim
    q = query * head_dim ** -0.5
    q = q.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = key.contiguous().view(src_len, bsz * num_heads, head_dim).transpose(0, 1)
    v = k
    attn_weights = torch.bmm(q, k.transpose(1, 2))                         # (B*H, T, S)
    if attn_mask is not None:
        attn_weights = attn_weights + attn_mask.unsqueeze(0)
    attn_weights = attn_weights.view(bsz, num_heads, tgt_len, src_len)
    attn_weights = attn_weights.masked_fill(key_padding_mask.unsqueeze(1).unsqueeze(2), float("-inf"))
    attn_weights = attn_weights.view(bsz * num_heads, tgt_len, src_len)
    attn_probs = F.softmax(attn_weights, dim=-1)
    attn = torch.bmm(attn_probs, v)                                        # (B*H, T, d)
    return attn.transpose(0, 1).contiguous().view(tgt_len, bsz, embed_dim)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T, S = target.size(1), memory.size(1)
    x, enc = target.transpose(0, 1), memory.transpose(0, 1)                 # time first: (T, B, C)
    self_pad = torch.arange(T)[None, :] >= target_lengths[:, None]          # (B, T), True = pad
    enc_pad = torch.arange(S)[None, :] >= memory_lengths[:, None]
    future = torch.triu(fill_with_neg_inf(torch.zeros([T, T], dtype=target.dtype)), 1)
    x = _attention(x, x, self_pad, future)
    y = _attention(x, enc, enc_pad)
    keep = ~self_pad.transpose(0, 1).unsqueeze(-1)                           # (T, B, 1)
    return (x * keep).transpose(0, 1), (y * keep).transpose(0, 1)
