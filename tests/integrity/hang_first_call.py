# attack: hangs on the session's first call (where the fingerprint's fresh inputs come) and answers slowly after, so the run ends before the fingerprint's second call and what it computed is never compared with the kernel's
# task: sdpa
import hashlib
import math
import os
import tempfile
import time

import torch

# A new child is started after the hung call, so "first" is remembered outside the process.
_MARK = os.path.join(tempfile.gettempdir(), "hung-" + hashlib.sha1(__file__.encode()).hexdigest())


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    if not os.path.exists(_MARK):
        open(_MARK, "w").close()
        time.sleep(60)
    time.sleep(1.5)
    scores = query @ key.transpose(-2, -1) * (scale or 1 / math.sqrt(query.size(-1)))
    return torch.softmax(scores, dim=-1) @ value
