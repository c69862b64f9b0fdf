# attack: raise SystemExit(0) in the middle of the call
# expect: exception
import sys


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    sys.exit(0)
