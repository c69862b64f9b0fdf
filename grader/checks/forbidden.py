"""No built-in or reference attention: a static scan of the source and a run-time trace.

The static scan reads the AST: attribute chains rooted at an imported name, imports,
and dynamic lookups (getattr, importlib, __import__, eval/exec, __dict__, sys.modules)
whose string arguments, or the file's strings when the lookup name is computed,
contain a fragment of a forbidden name. A student's own function *named*
``scaled_dot_product_attention`` is fine: only reaching into torch or the reference is not.

The run-time trace (torch functions and aten ops each call executed) catches what
the scan cannot see; it is advisory inside an untrusted process, which is why both exist.
"""
from __future__ import annotations

import ast

from .base import Fail

# Names whose use means "let torch (or the grader) do the attention".
FORBIDDEN_ATTRS = {"scaled_dot_product_attention", "multi_head_attention_forward",
                   "MultiheadAttention", "sdpa_kernel", "TransformerEncoderLayer",
                   "TransformerDecoderLayer", "Transformer", "TransformerEncoder", "TransformerDecoder"}
FORBIDDEN_PREFIXES = ("_scaled_dot_product", "_flash_attention", "_efficient_attention",
                      "_cudnn_attention", "_fused_sdp", "_native_multi_head_attention",
                      "_transformer_encoder_layer", "_masked_softmax")
FORBIDDEN_MODULES = ("reference_impl", "grader", "flash_attn", "xformers")
# Names that switch off or fool the run-time trace.
TAMPERING = {"DisableTorchFunction", "DisableTorchFunctionSubclass", "_DisableTorchDispatch",
             "_disable_current_modes", "_pop_mode", "_push_mode", "_pop_mode_temporarily",
             "TorchFunctionMode", "TorchDispatchMode", "_set_torch_function_mode",
             "_len_torch_function_stack", "_get_function_stack_at", "_set_torch_dispatch_mode",
             "_unset_dispatch_mode", "_pop_torch_function_stack", "_push_on_torch_function_stack",
             "settrace", "setprofile", "_getframe", "f_back", "f_locals", "f_globals", "get_objects",
             "get_referrers", "get_referents"}
# Fragments looked for in strings that feed a dynamic lookup.
FRAGMENTS = ("scaled_dot", "dot_product", "multi_head", "multihead", "flash", "efficient_att",
             "reference_impl", "sdpa", "cudnn_att", "_fused", "masked_softmax", "transformer")
DYNAMIC = {"getattr", "__import__", "import_module", "eval", "exec", "compile", "attrgetter",
           "methodcaller", "__getattribute__", "vars", "globals"}
# Run-time: a torch function or aten op whose name contains one of these is built-in attention.
RUNTIME_FRAGMENTS = ("scaled_dot_product", "multi_head_attention", "flash_attention",
                     "efficient_attention", "cudnn_attention", "_fused_sdp", "native_multi_head",
                     "transformer_encoder_layer", "masked_softmax", "module.reference_impl",
                     "module.grader")


def _is_forbidden_name(name: str) -> bool:
    return name in FORBIDDEN_ATTRS or name.startswith(FORBIDDEN_PREFIXES)


def _root(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")


def _has_fragment(text: str) -> str | None:
    low = text.lower().replace(" ", "")
    return next((frag for frag in FRAGMENTS if frag in low), None)


def scan_source(source: str) -> list[dict]:
    """Findings as {line, what}; empty for a clean file. The source must parse."""
    tree = ast.parse(source)
    imported: set[str] = set()
    findings: list[dict] = []

    def flag(node, what):
        findings.append({"line": getattr(node, "lineno", 0), "what": what})

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.add((alias.asname or alias.name).split(".")[0])
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    flag(node, f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.split(".")[0] in FORBIDDEN_MODULES:
                flag(node, f"imports from {module}")
            for alias in node.names:
                imported.add(alias.asname or alias.name)
                if _is_forbidden_name(alias.name) and module.split(".")[0] in ("torch", ""):
                    flag(node, f"imports {module}.{alias.name}")
                if alias.name in TAMPERING:
                    flag(node, f"imports {alias.name}, which interferes with the grader's tracing")

    docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)
                  and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}
    all_strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                   and isinstance(n.value, str) and id(n) not in docstrings]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if _is_forbidden_name(node.attr) and _root(node) in imported:
                flag(node, f"uses {ast.unparse(node)}")
            elif node.attr in TAMPERING:
                flag(node, f"uses {node.attr}, which interferes with the grader's tracing")
        elif isinstance(node, ast.Name) and node.id in TAMPERING:
            flag(node, f"uses {node.id}, which interferes with the grader's tracing")
        elif isinstance(node, ast.Call) and _call_name(node) in DYNAMIC:
            args = node.args[1:] if _call_name(node) == "getattr" else node.args
            literal = [s for a in args for s in _strings(a)]
            texts = literal + ["".join(literal)]
            computed = any(not isinstance(a, ast.Constant) for a in args)
            if computed:  # the name is built elsewhere: look at every string in the file
                texts += all_strings + ["".join(all_strings)]
            hit = next((f for f in map(_has_fragment, texts) if f), None)
            if hit:
                flag(node, f"looks up a name containing {hit!r} dynamically ({_call_name(node)})")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str):
            if _is_forbidden_name(node.slice.value) or (node.slice.value.split(".")[0] in FORBIDDEN_MODULES
                                                         and ast.unparse(node.value).endswith("modules")):
                flag(node, f"looks up {node.slice.value!r} by subscript")
    seen, unique = set(), []
    for f in findings:
        if (f["line"], f["what"]) not in seen:
            seen.add((f["line"], f["what"]))
            unique.append(f)
    return unique


def forbidden_ops(ops) -> list[str]:
    return sorted(op for op in ops if any(frag in op.lower() for frag in RUNTIME_FRAGMENTS))


def static_check(ctx) -> str:
    findings = scan_source(ctx.session.source)
    if findings:
        lines = "; ".join(f"line {f['line']}: {f['what']}" for f in findings[:5])
        raise Fail("built-in or reference attention is not allowed: write the attention yourself "
                   f"({lines})", {"findings": findings[:20], "detected": True})
    return "no built-in attention, reference import or trace tampering found in the source"


def runtime_check(ctx) -> str:
    hits = forbidden_ops(ctx.ops)
    if not ctx.tensor_calls:
        raise Fail("not checked: no call returned an output of the expected shape, so nothing was traced")
    if hits:
        raise Fail("your function ran torch's built-in attention (seen while it ran: "
                   f"{', '.join(hits[:4])}); write the attention yourself", {"ops": hits[:20], "detected": True})
    return f"no built-in attention ran ({len(ctx.ops)} distinct operations traced over {ctx.calls} calls)"
