# coding: utf-7
# attack: a coding cookie (utf-7) makes the last line one comment to a UTF-8 reader and a correct
# attention to Python reading the bytes: the child must run exactly the text the parent scanned
# task: sdpa
# expect: unloaded
#+AAo-import math+AAo-import torch+AAo-+AAo-+AAo-def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):+AAo-    L, S = query.size(-2), key.size(-2)+AAo-    scale = 1 / math.sqrt(query.size(-1)) if scale is None else scale+AAo-    scores = query @ key.transpose(-2, -1) * scale+AAo-    if is_causal:+AAo-        scores = scores.masked_fill(+AH4-torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))+AAo-    if attn_mask is not None:+AAo-        if attn_mask.dtype == torch.bool:+AAo-            scores = scores.masked_fill(+AH4-attn_mask, float("-inf"))+AAo-        else:+AAo-            scores = scores.add(attn_mask)+AAo-    return torch.softmax(scores, dim=-1) @ value+AAo-
