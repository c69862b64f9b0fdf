# attack: exit with status 0 in the middle of the call, hoping for "success"
# expect: crash
import os
import sys


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    sys.stdout.flush()
    os._exit(0)
