"""Hugging Face BART's decoder masks: a causal mask and an expanded padding mask, both additive with finfo.min.

Source: https://github.com/huggingface/transformers (src/transformers/models/bart/modeling_bart.py,
v4.2x: ``_make_causal_mask``, ``_expand_mask`` and ``BartAttention.forward``, which scales the
query states by ``head_dim ** -0.5`` and adds ``attention_mask`` to ``attn_weights``), Apache-2.0
licence. Adapted, not copied: no projections, one head; the 0/1 padding masks built from the
lengths; padded rows zeroed.
Why correct: each mask adds finfo(dtype).min where a key is hidden and 0 where it may be attended;
the two masks are summed as BART sums them (a key hidden by both gets -inf, which is harmless: no
row is fully masked, key 0 is always real and visible).
"""
import torch


def _make_causal_mask(tgt_len, dtype):
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, dtype=dtype)
    mask_cond = torch.arange(mask.size(-1))
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    return mask.to(dtype)[None, None, :, :]                                  # (1, 1, T, T)


def _expand_mask(mask, dtype, tgt_len):
    bsz, src_len = mask.size()
    expanded_mask = mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    inverted_mask = 1.0 - expanded_mask
    return inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)


def _attention(hidden_states, key_value_states, attention_mask):
    head_dim = hidden_states.size(-1)
    query_states = hidden_states * head_dim ** -0.5
    attn_weights = torch.bmm(query_states, key_value_states.transpose(1, 2))
    attn_weights = attn_weights + attention_mask[:, 0]
    attn_weights = torch.nn.functional.softmax(attn_weights, dim=-1)
    return torch.bmm(attn_weights, key_value_states)


def decoder_attention(target, memory, target_lengths, memory_lengths):
    T, S = target.size(1), memory.size(1)
    dtype = target.dtype
    decoder_attention_mask = (torch.arange(T)[None, :] < target_lengths[:, None]).long()
    encoder_attention_mask = (torch.arange(S)[None, :] < memory_lengths[:, None]).long()
    combined = _make_causal_mask(T, dtype) + _expand_mask(decoder_attention_mask, dtype, T)
    hidden = _attention(target, target, combined)
    cross = _attention(hidden, memory, _expand_mask(encoder_attention_mask, dtype, T))
    rows = decoder_attention_mask[:, :, None].to(dtype)
    return hidden * rows, cross * rows
