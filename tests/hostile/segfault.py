# attack: crash the interpreter with a segmentation fault
# expect: crash
import ctypes


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return ctypes.string_at(0)
