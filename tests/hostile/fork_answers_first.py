# attack: a forked copy of the harness answers the call first (it raises at once while the real one sleeps), hoping the grader reads its answer
# expect: wrong
import os
import time

_calls = [0]


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    _calls[0] += 1
    if _calls[0] == 1:
        if os.fork() == 0:
            raise RuntimeError("the forked copy's answer")
        time.sleep(0.5)
    return q * 0
