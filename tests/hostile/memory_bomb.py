# attack: allocate far more memory than allowed, with Python and with torch
# expect: exception memory
import torch


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    hoard = []
    try:
        while True:
            hoard.append(bytearray(256 << 20))
    except MemoryError:
        hoard.clear()
    return torch.ones(1 << 34, dtype=torch.uint8)
