"""Yu-Hsiang Huang's attention-is-all-you-need-pytorch: get_pad_mask, get_subsequent_mask and the temperature.

Source: https://github.com/jadore801120/attention-is-all-you-need-pytorch (transformer/Models.py:
``get_pad_mask``, ``get_subsequent_mask``; transformer/Modules.py: ``ScaledDotProductAttention``
with ``temperature = d_k ** 0.5`` dividing q before the product), MIT licence. Adapted, not copied:
no projections or dropout; one head in the (B, n_head, len, d_k) layout the layers use; padding
masks from the lengths instead of a pad index; padded rows zeroed.
Why correct: get_pad_mask is (B, 1, T) over the keys, get_subsequent_mask is
``(1 - triu(ones, 1)).bool()`` (tril); q / √d_k before the product is the same scale (rounded a
little differently); -1e9 where the mask is 0; no row is fully masked.
"""
import torch
import torch.nn.functional as F


def get_pad_mask(lengths, n):
    return (torch.arange(n)[None, :] < lengths[:, None]).unsqueeze(-2)               # (B, 1, n)


def get_subsequent_mask(n):
    return (1 - torch.triu(torch.ones((1, n, n)), diagonal=1)).bool()               # (1, n, n)


class ScaledDotProductAttention:
    def __init__(self, temperature):
        self.temperature = temperature

    def __call__(self, q, k, v, mask=None):
        attn = torch.matmul(q / self.temperature, k.transpose(2, 3))
        if mask is not None:
            attn = attn.masked_fill(mask == 0, -1e9)
        attn = F.softmax(attn, dim=-1)
        return torch.matmul(attn, v)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    sz_b, len_q, d_k = target.shape
    len_k = memory.size(1)
    attention = ScaledDotProductAttention(temperature=d_k ** 0.5)
    trg_mask = get_pad_mask(target_lengths, len_q) & get_subsequent_mask(len_q)
    src_mask = get_pad_mask(memory_lengths, len_k)
    heads = lambda x, n: x.view(sz_b, n, 1, d_k).transpose(1, 2)                    # (B, 1, n, d_k)
    slf = attention(heads(target, len_q), heads(target, len_q), heads(target, len_q), trg_mask.unsqueeze(1))
    enc = attention(slf, heads(memory, len_k), heads(memory, len_k), src_mask.unsqueeze(1))
    keep = get_pad_mask(target_lengths, len_q).transpose(1, 2)                      # (B, T, 1)
    slf, enc = (o.transpose(1, 2).contiguous().view(sz_b, len_q, -1) for o in (slf, enc))
    return slf.masked_fill(~keep, 0), enc.masked_fill(~keep, 0)
