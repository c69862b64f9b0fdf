# attack: run programs: a shell, su and sudo, and curl the grader
# expect: exception
import subprocess


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    report = []
    for cmd in (["id"], ["su", "-c", "id"], ["sudo", "id"], ["sh", "-c", "cat /etc/shadow"],
                ["curl", "-s", "http://127.0.0.1:{{PORT}}/"]):
        try:
            out = subprocess.run(cmd, capture_output=True, timeout=2)
            report.append(f"{cmd[0]}: rc={out.returncode} {out.stdout[:80]!r} {out.stderr[:80]!r}")
        except Exception as exc:
            report.append(f"{cmd[0]}: {type(exc).__name__}")
    raise RuntimeError("; ".join(report))
