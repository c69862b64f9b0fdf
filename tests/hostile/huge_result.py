# attack: answer with a result too large to transfer (and an unsupported dtype on the next call)
# expect: exception memory protocol
import torch


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    return torch.zeros(300 << 20, dtype=torch.uint8).expand(4, 300 << 20)
