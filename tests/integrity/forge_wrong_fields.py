# attack: every answer rewritten on its way out, with fields of the wrong types
# task: sdpa
# levels: none local auto
# expect: protocol
# (the forgery needs the harness as the child's __main__, which it is only without the namespace sandbox)
# reaches: none
import sys

_wire = getattr(sys.modules.get("__main__"), "wire", None)
if _wire is not None:
    _orig = _wire.write_message

    def _forge(fd, message, **kw):
        if isinstance(message, dict) and "output" in message:
            message.update({"output": "a string", "ops": 7, "elapsed": "soon", "grads": {"x": 1}})
        return _orig(fd, message, **kw)

    _wire.write_message = _forge


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    return value[..., :1, :].expand(*value.shape[:-2], query.size(-2), value.size(-1)).clone()
