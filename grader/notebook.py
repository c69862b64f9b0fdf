"""Jupyter notebooks as submissions: their code cells become one Python file, graded like a .py.

``notebook_script`` reads a ``.ipynb`` with ``nbformat`` and joins its code cells, each behind a
``# %% [cell N]`` marker (the "percent" cell format that VS Code, Spyder and jupytext read), so the
script alone says which line came from which cell: the server stores only the script, and the
result page, ``attn-grader check`` and ``attn-grader submit`` map line numbers back with
``CellMap.from_script``. Cells are numbered 1, 2, ... from the top of the notebook, markdown cells
included, as a student counts them on screen.

IPython magics (``%time``, ``%%writefile``) and shell lines (``!pip install``) are rejected with the
cell's number: the grader runs plain Python, where they would only be a confusing syntax error.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from . import bounded

NOTEBOOK_SUFFIX = ".ipynb"
SCRIPT_FILENAME = "submission.py"  # the name the sandbox gives the script (its tracebacks say so)
MARKER = re.compile(r"^# %% \[cell (\d+)\]$")
# A magic or shell escape where a statement starts: "%time f()", "%%bash", "!ls", "files = !ls".
MAGIC_LINE = re.compile(r"^\s*(?:[A-Za-z_]\w*\s*=\s*)?(%%?|!(?!=))")


class NotebookError(ValueError):
    """A notebook that cannot be graded; the message says why and, where it can, which cell."""


def is_notebook(filename: str | None) -> bool:
    return bool(filename) and filename.lower().endswith(NOTEBOOK_SUFFIX)


def _snippet(line: str) -> str:
    line = line.strip()
    return line if len(line) <= 60 else line[:57] + "..."


def _magic_problem(number: int, source: str, parses: bool | None) -> str | None:
    """Why cell ``number`` cannot run as plain Python, if the reason is a magic or shell line
    (``parses``: whether the cell is valid Python, from ``bounded.parses``)."""
    if parses:
        return None  # valid Python: a '%' or '!' in it is an operator or inside a string
    for line_no, line in enumerate(source.splitlines(), 1):
        match = MAGIC_LINE.match(line)
        if match:
            what = "an IPython cell magic" if match.group(1) == "%%" else \
                "an IPython magic" if match.group(1) == "%" else "a shell command"
            return (f"cell {number} uses {what} on its line {line_no} ({_snippet(line)!r}); the grader "
                    f"runs plain Python: delete that line or move it to a cell you do not submit")
    return None  # another syntax error: grading reports it, with its cell


def notebook_script(data: bytes | str) -> str:
    """The notebook's code cells as one script with ``# %% [cell N]`` markers.

    Raises ``NotebookError`` for a file that is not a Jupyter notebook, a notebook for another
    language, one without code, or a cell that uses a magic or a shell line.
    """
    import nbformat  # imported here: `attn-grader check file.py` does not need it

    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"the notebook is not UTF-8 text (byte {exc.start}); save it from "
                                f"Jupyter again") from None
    try:
        notebook = nbformat.reads(data.lstrip("\ufeff"), as_version=4)  # some editors write a BOM
    except Exception as exc:  # nbformat raises JSON, key and version errors of several kinds
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise NotebookError(f"this is not a Jupyter notebook that nbformat can read: {reason}") from None
    language = (notebook.metadata.get("kernelspec") or {}).get("language") or \
        (notebook.metadata.get("language_info") or {}).get("name") or "python"
    if str(language).lower() != "python":
        raise NotebookError(f"the notebook's kernel runs {language}, not Python")
    cells = []
    for number, cell in enumerate(notebook.cells, 1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source") or ""
        cells.append((number, "".join(source) if isinstance(source, list) else str(source)))
    # Only a cell with a line that looks like a magic needs parsing, and all of them are parsed in
    # one limited process (grader/bounded.py), never in the web app's or the CLI's own.
    suspects = [source for _, source in cells if any(MAGIC_LINE.match(line) for line in source.splitlines())]
    parsed = dict(zip(suspects, bounded.parses(suspects))) if suspects else {}
    parts = []
    for number, source in cells:
        problem = _magic_problem(number, source, parsed.get(source, True))
        if problem:
            raise NotebookError(problem)
        parts.append(f"# %% [cell {number}]\n{source.rstrip()}\n")
    if not any(part.split("\n", 1)[1].strip() for part in parts):
        raise NotebookError("the notebook has no code cells with code in them")
    return "\n".join(parts)


@dataclass(frozen=True)
class CellMap:
    """Script line numbers -> (cell number, line within the cell), from the script's markers."""
    starts: tuple  # script line of each marker, ascending
    cells: tuple   # the cell number behind each marker

    @classmethod
    def from_script(cls, script: str) -> CellMap:
        starts, cells = [], []
        for line_no, line in enumerate(script.splitlines(), 1):
            match = MARKER.match(line)
            if match:
                starts.append(line_no)
                cells.append(int(match.group(1)))
        return cls(tuple(starts), tuple(cells))

    def locate(self, line: int) -> tuple[int, int] | None:
        """(cell, line in that cell) of script line ``line``; None for a marker or outside."""
        i = bisect.bisect_right(self.starts, line) - 1
        if i < 0 or line == self.starts[i]:
            return None
        return self.cells[i], line - self.starts[i]

    def where(self, line: int) -> str | None:
        found = self.locate(line)
        return f"cell {found[0]}, line {found[1]}" if found else None

    def defining_cell(self, script: str, function: str) -> int | None:
        """The cell whose top-level ``def function`` the grader calls (the last one wins), read in
        a limited process (``bounded.top_level_defs``)."""
        lines = bounded.top_level_defs(script, function)
        found = self.locate(lines[-1]) if lines else None
        return found[0] if found else None

    # Patterns in tracebacks and messages that carry a line of the script.
    _FRAME = re.compile(r'(File "(?:[^"]*/)?' + re.escape(SCRIPT_FILENAME) + r'", line )(\d+)')
    _NAMED = re.compile(re.escape(SCRIPT_FILENAME) + r" line (\d+)")
    _BARE = re.compile(r"\bline (\d+)\b")

    def traceback(self, text: str) -> str:
        """A traceback whose frames in the submission say their cell and line there."""
        def frame(m):
            where = self.where(int(m.group(2)))
            return m.group(0) + (f" ({where})" if where else "")
        return self._FRAME.sub(frame, text)

    def message(self, text: str, bare_lines: bool = False) -> str:
        """``submission.py line N`` (and, for load and static checks, ``line N``) with the cell."""
        def named(m):
            where = self.where(int(m.group(1)))
            return f"{where} of the notebook" if where else m.group(0)
        text = self._NAMED.sub(named, text)
        if bare_lines:
            text = self._BARE.sub(lambda m: self.where(int(m.group(1))) or m.group(0), text)
        return text


def annotate_check(check: dict, cells: CellMap) -> dict:
    """A check's dict (as in ``GradeReport.to_dict``) with its line numbers told as cells."""
    details = dict(check.get("details") or {}) if isinstance(check.get("details"), dict) else \
        check.get("details")
    out = dict(check)
    # load.source and the static checks report lines of the script in their own words
    bare = str(check.get("id", "")).startswith(("load.", "forbidden.static"))
    out["message"] = cells.message(str(check.get("message") or ""), bare_lines=bare)
    if out["message"] != str(check.get("message") or ""):  # its template names lines, not cells
        out.pop("message_i18n", None)
    if isinstance(details, dict):
        if isinstance(details.get("traceback"), str):
            details["traceback"] = cells.traceback(details["traceback"])
        if isinstance(details.get("line"), int) and cells.where(details["line"]):
            details["cell"] = cells.where(details["line"])
            caret = details.get("caret")
            old = f"{details['line']} | "
            if isinstance(caret, str) and caret.startswith(old) and "\n" in caret:  # the caret names the cell
                code, mark = caret.split("\n", 1)
                new = f"{details['cell']} | "
                details["caret"] = new + code[len(old):] + "\n" + " " * len(new) + mark[len(old):]
        out["details"] = details
    return out


def annotate_report(report, script: str) -> CellMap:
    """Rewrite a ``GradeReport``'s messages and tracebacks in place to name cells."""
    cells = CellMap.from_script(script)
    for check in report.checks:
        annotated = annotate_check({"id": check.id, "message": check.message, "details": check.details}, cells)
        if annotated["message"] != check.message:  # unchanged, it keeps its template (grader/i18n.py)
            check.message = annotated["message"]
        check.details = annotated["details"]
    if report.error and cells.message(report.error, bare_lines=True) != report.error:
        report.error = cells.message(report.error, bare_lines=True)
    return cells


def template_notebook(task_id: str, lang: str | None = None) -> str:
    """The task's starter notebook: the spec as a markdown cell, then the .py template's code.

    Built from the same files as ``attn-grader template`` so the two starters never disagree.
    """
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from .tasks import spec_markdown, template

    code = template(task_id, lang).replace(".py --task", ".ipynb --task")
    notebook = new_notebook(cells=[new_markdown_cell(spec_markdown(task_id, lang), id="task-spec"),
                                   new_code_cell(code.rstrip(), id="your-code")],
                            metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                     "language": "python"},
                                      "language_info": {"name": "python"}})
    return nbformat.writes(notebook) + "\n"
