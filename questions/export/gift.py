"""GIFT, Moodle's plain-text question format.

Same mapping as the Moodle XML export, within what GIFT can say:

* texts are HTML (``[html]``) on one line, a real line break written as GIFT's ``\\n`` escape:
  Moodle trims every line and ends a question at an empty one, so a paragraph break or the
  indentation of a code block would not survive as real lines;
* numbers are plain decimals, each common mistake with the tolerance around its own value;
* GIFT has no syntax for a question's mark (every question imports with 1 point), no rubric
  and no matching distractor: those go into ``//`` comments above the question (Moodle drops
  comments on import, so set the marks in the quiz);
* a code question becomes an essay whose text shows the starter code (GIFT cannot set a
  response template or a monospaced editor);
* ordering is matching of each item to its position: GIFT has no ordering type, so the credit
  is by absolute position there, not by relative order as in the service (a ``//`` comment
  says so; Moodle XML carries Moodle's ordering type instead);
* a matrix to fill in becomes an essay with the key in a comment (GIFT has no question with
  several numeric blanks; Moodle XML writes it as Cloze); a matrix entry is numeric;
* a shape, big-O or formula answer is a short answer that accepts the key's usual spellings,
  each mistake's spellings at 0 % with its feedback, as literal patterns (``\\*`` for a ``*``,
  which Moodle would read as a wildcard; GIFT's ``\\\\`` gives Moodle the backslash).
"""
from __future__ import annotations

import html

from . import markdown_html, plain_decimal
from ..variants import format_number
from .moodle import shortanswer_pattern

_SPECIAL = "\\~=#{}:"


def escape(text: str) -> str:
    """Backslash GIFT's control characters; a line break becomes GIFT's ``\\n`` escape."""
    out = "".join("\\" + c if c in _SPECIAL else c for c in text)
    return out.replace("\r\n", "\n").replace("\n", "\\n")


def _html(markdown_text: str) -> str:
    return escape(markdown_html(markdown_text).strip())


def _comment(text: str) -> str:
    return "\n".join("// " + line for line in text.split("\n"))


def _fraction(value: float) -> str:
    return f"{value:.5f}".rstrip("0").rstrip(".")


def _question(inst: dict) -> str:
    kind = inst["kind"]
    lines = [_comment(f"{inst['id']} [{inst['kind']}, {inst['difficulty']}] topics: {', '.join(inst['topics'])}"),
             _comment(f"points: {format_number(inst['points'])} (GIFT cannot carry a mark; set it in the quiz)")]
    prompt = markdown_html(inst["prompt"]).strip()
    if kind == "code":
        prompt += f"<pre><code>{html.escape(inst['template'].rstrip())}</code></pre>"
    head = f"::{escape(inst['title'])}::[html]{escape(prompt)}"
    body: list[str] = []
    if kind in ("single", "multiple"):
        right = sum(o["correct"] for o in inst["options"])
        wrong = len(inst["options"]) - right
        for o in inst["options"]:
            if kind == "single":
                mark = "=" if o["correct"] else "~"
            else:
                mark = f"~%{_fraction(100 / right if o['correct'] else -100 / wrong)}%"
            body.append(f"\t{mark}{_html(o['text'])}#{_html(o['feedback'])}")
    elif kind == "numeric" or kind == "matrix" and inst["ask"] == "entry":
        body.append(f"\t={plain_decimal(inst['answer'])}:{plain_decimal(inst['tolerance'])}")
        body += [f"\t=%0%{plain_decimal(m['value'])}:{plain_decimal(m['tolerance'])}#{_html(m['feedback'])}"
                 for m in inst["mistakes"]]
    elif kind == "matching":
        body += [f"\t={escape(p['left'])} -> {escape(p['right'])}" for p in inst["pairs"]]
        if inst["distractors"]:
            lines.append(_comment("distractors not expressible in GIFT: " +
                                  " | ".join(x["text"] for x in inst["distractors"])))
    elif kind == "ordering":
        lines.append(_comment("GIFT has no ordering type: items are matched to positions and credited by "
                              "absolute position (the Moodle XML export uses Moodle's ordering type)"))
        body += [f"\t={escape(i['text'])} -> {n}" for n, i in enumerate(inst["items"], 1)]
    elif kind == "matrix" and inst["ask"] == "matrix":
        lines.append(_comment("GIFT has no question with several numeric blanks: a hand-graded essay "
                              "(the Moodle XML export writes a Cloze question). Key, each entry within "
                              f"{plain_decimal(inst['tolerance'])}: " +
                              "; ".join(", ".join(format_number(round(x, 4)) for x in row) for row in inst["matrix"])))
    elif kind in ("shape", "big_o", "expression"):
        # Moodle's short answer: the same literal patterns as the Moodle XML export (an unescaped
        # ``*`` would be a wildcard), then GIFT's escapes on top (its ``\\`` gives Moodle the ``\``)
        body += [f"\t={escape(shortanswer_pattern(text))}" for text in inst["spellings"]]
        body += [f"\t=%0%{escape(shortanswer_pattern(text))}#{_html(m['feedback'])}"
                 for m in inst["mistakes"] for text in m["spellings"]]
    elif kind == "free_text":
        lines.append(_comment("rubric: " + " | ".join(f"[{format_number(r['points'])}] {r['text']}"
                                                       for r in inst["rubric"])))
        lines.append(_comment("model answer: " + inst["model_answer"].replace("\n", " ")))
    elif kind == "code":
        lines.append(_comment("reference solution:\n" + inst["model_solution"].rstrip()))
    numeric = kind == "numeric" or kind == "matrix" and inst["ask"] == "entry"
    open_brace = "{#" if numeric else "{"
    text = f"{head}{open_brace}\n" + "\n".join(body) if body else head + open_brace
    if inst["explanation"]:
        text += f"\n\t####{_html(inst['explanation'])}"
    text += "\n}" if body or inst["explanation"] else "}"
    lines.append(text)
    return "\n".join(lines)


def to_gift(instances: list[dict], category: str = "attn-grader") -> str:
    parts = [f"$CATEGORY: $course$/top/{category}"] + [_question(i) for i in instances]
    return "\n\n".join(parts) + "\n"
