# expect: forbidden
# bug: hides the built-in's name from a source scan (reversed string); only the run-time trace sees it
import torch.nn.functional as F

_HIDDEN = "noitnetta_tcudorp_tod_delacs"[::-1]


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return vars(F)[_HIDDEN](query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
