"""GIFT, Moodle's plain-text question format, with Markdown texts.

Same mapping as the Moodle XML export; GIFT cannot express a matching question's extra
distractors or an essay's rubric, so those go into a comment above the question.
"""
from __future__ import annotations

from ..variants import format_number

_SPECIAL = "\\~=#{}:"


def escape(text: str) -> str:
    """Backslash GIFT's control characters; newlines become spaces (one line per answer)."""
    out = "".join("\\" + c if c in _SPECIAL else c for c in text)
    return out


def _multiline(text: str) -> str:
    # GIFT question text may span lines, but a blank line ends the question: keep paragraphs
    # apart with a line holding one space
    return "\n".join(line if line.strip() else " " for line in escape(text).split("\n"))


def _comment(text: str) -> str:
    return "\n".join("// " + line for line in text.split("\n"))


def _fraction(value: float) -> str:
    return f"{value:.5f}".rstrip("0").rstrip(".")


def _question(inst: dict) -> str:
    kind = inst["kind"]
    lines = [_comment(f"{inst['id']} [{inst['kind']}, {inst['difficulty']}] topics: {', '.join(inst['topics'])}")]
    head = f"::{escape(inst['title'])}::[markdown]{_multiline(inst['prompt'])}"
    body: list[str] = []
    if kind in ("single", "multiple"):
        right = sum(o["correct"] for o in inst["options"])
        wrong = len(inst["options"]) - right
        for o in inst["options"]:
            if kind == "single":
                mark = "=" if o["correct"] else "~"
            else:
                mark = f"~%{_fraction(100 / right if o['correct'] else -100 / wrong)}%"
            body.append(f"\t{mark}{escape(o['text'])}#{escape(o['feedback'])}")
    elif kind == "numeric":
        tol = repr(inst["tolerance"])
        body.append(f"\t={repr(inst['answer'])}:{tol}")
        body += [f"\t=%0%{repr(m['value'])}:{tol}#{escape(m['feedback'])}" for m in inst["mistakes"]]
    elif kind == "matching":
        body += [f"\t={escape(p['left'])} -> {escape(p['right'])}" for p in inst["pairs"]]
        if inst["distractors"]:
            lines.append(_comment("distractors not expressible in GIFT: " +
                                  " | ".join(x["text"] for x in inst["distractors"])))
    elif kind == "ordering":
        body += [f"\t={escape(i['text'])} -> {n}" for n, i in enumerate(inst["items"], 1)]
    elif kind == "free_text":
        lines.append(_comment("rubric: " + " | ".join(f"[{format_number(r['points'])}] {r['text']}"
                                                       for r in inst["rubric"])))
        lines.append(_comment("model answer: " + inst["model_answer"].replace("\n", " ")))
    elif kind == "code":
        lines.append(_comment("reference solution:\n" + inst["model_solution"].rstrip()))
    open_brace = "{#" if kind == "numeric" else "{"
    if body:
        text = f"{head}{open_brace}\n" + "\n".join(body)
    else:
        text = head + open_brace
    if inst["explanation"]:
        text += f"\n\t####{escape(inst['explanation'])}"
    text += "\n}" if body or inst["explanation"] else "}"
    lines.append(text)
    return "\n".join(lines)


def to_gift(instances: list[dict], category: str = "attn-grader") -> str:
    parts = [f"$CATEGORY: $course$/top/{category}"] + [_question(i) for i in instances]
    return "\n\n".join(parts) + "\n"
