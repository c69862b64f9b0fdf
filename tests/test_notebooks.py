"""Notebook submissions: reading code cells, rejecting magics, naming cells in feedback, through
`attn-grader check`, the task page and `attn-grader submit`."""
import io
import json
import re
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.notebook import CellMap, NotebookError, annotate_check, notebook_script, template_notebook
from pages_support import ada, env, grade_queued  # noqa: F401  (fixtures)
from service_support import ROOT, env_for, running_server

CRASHING = ("import torch\n\n"
            "def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):\n"
            "    scores = query @ key.transpose(-2, -1)\n"
            "    raise RuntimeError('not finished')\n")


def notebook(*cells) -> str:
    """A notebook from ('md', text) and ('code', text) pairs, as nbformat writes it."""
    made = [new_markdown_cell(text) if kind == "md" else new_code_cell(text) for kind, text in cells]
    return nbformat.writes(new_notebook(cells=made))


def crashing_notebook() -> str:
    # the function is in cell 3; its `raise` is that cell's line 5
    return notebook(("code", "import math"), ("md", "## My attention"), ("code", CRASHING))


def traceback_grade(code, task, **_):
    """A grader that fails one check with a traceback at the line of the code's `raise`."""
    line = next(i for i, text in enumerate(code.splitlines(), 1) if "raise" in text)
    return {"task": task, "score": 2.0, "max_score": 10.0, "passed": False, "error": None,
            "grader_version": "fake-1.0", "sandbox": "none", "warnings": [], "timings": {},
            "checks": [{"id": "output.shapes", "passed": False, "points": 0.0, "max_points": 8.0,
                        "message": f"your function raised RuntimeError at submission.py line {line}",
                        "details": {"traceback": f'  File "submission.py", line {line}, in f\n'
                                                 f"RuntimeError: not finished"}},
                       {"id": "load.import", "passed": True, "points": 2.0, "max_points": 2.0,
                        "message": "imports", "details": {}}]}


# ---- reading notebooks ------------------------------------------------------------------------

def test_code_cells_become_a_script_that_maps_lines_back_to_cells():
    script = notebook_script(crashing_notebook())
    assert "## My attention" not in script
    compile(script, "submission.py", "exec")
    cells = CellMap.from_script(script)
    raise_line = next(i for i, text in enumerate(script.splitlines(), 1) if "raise" in text)
    assert cells.locate(raise_line) == (3, 5)
    assert cells.locate(2) == (1, 1)  # "import math", just below cell 1's marker
    assert cells.locate(1) is None    # the marker itself
    assert cells.defining_cell(script, "scaled_dot_product_attention") == 3
    assert cells.defining_cell(script, "multi_head_attention") is None


def test_a_notebook_saved_with_a_byte_order_mark_is_read():
    assert "import math" in notebook_script(("\ufeff" + crashing_notebook()).encode("utf-8"))


def test_the_last_definition_is_the_one_graded():
    script = notebook_script(notebook(("code", "def f():\n    return 1"), ("code", "x = 1"),
                                      ("code", "def f():\n    return 2")))
    assert CellMap.from_script(script).defining_cell(script, "f") == 3


@pytest.mark.parametrize("cell, what", [
    ("%timeit f()", "an IPython magic on its line 1"),
    ("%%writefile attention.py\ndef f(): pass", "an IPython cell magic on its line 1"),
    ("import torch\n!pip install torch", "a shell command on its line 2"),
    ("files = !ls", "a shell command on its line 1"),
    ("x = 1\n    %matplotlib inline", "an IPython magic on its line 2"),
])
def test_magics_and_shell_lines_are_rejected_naming_the_cell(cell, what):
    with pytest.raises(NotebookError) as error:
        notebook_script(notebook(("md", "intro"), ("code", "import math"), ("code", cell)))
    assert f"cell 3 uses {what}" in str(error.value)
    assert "plain Python" in str(error.value)


def test_percent_and_bang_in_valid_python_are_not_magics():
    script = notebook_script(notebook(("code", "x = (7\n     % 3)\ny = x != 1\ns = '''\n!not a shell\n%s'''")))
    assert "% 3)" in script and "!not a shell" in script


@pytest.mark.parametrize("data, message", [
    (b"def f(): pass\n", "not a Jupyter notebook that nbformat can read"),
    (b'{"nbformat": 99, "cells": []}', "Unsupported nbformat version 99"),
    (b"[1, 2]", "not a Jupyter notebook that nbformat can read"),
    (b"\xff\xfe{}", "not UTF-8"),
    (notebook(("md", "only words")), "no code cells with code in them"),
])
def test_files_that_are_not_gradable_notebooks_say_why(data, message):
    with pytest.raises(NotebookError, match=message):
        notebook_script(data)


def test_a_notebook_for_another_language_is_refused():
    nb = new_notebook(cells=[new_code_cell("1 + 1")],
                      metadata={"kernelspec": {"name": "ir", "display_name": "R", "language": "R"}})
    with pytest.raises(NotebookError, match="kernel runs R, not Python"):
        notebook_script(nbformat.writes(nb))


def test_feedback_names_the_cell():
    script = notebook_script(crashing_notebook())
    report = traceback_grade(script, "sdpa")
    check = annotate_check(report["checks"][0], CellMap.from_script(script))
    assert check["message"] == "your function raised RuntimeError at cell 3, line 5 of the notebook"
    assert re.search(r'File "submission.py", line \d+ \(cell 3, line 5\), in f', check["details"]["traceback"])
    syntax = annotate_check({"id": "load.source", "message": "Python cannot parse your file: invalid "
                             "syntax (line 2)", "details": {"line": 2}}, CellMap.from_script(script))
    assert syntax["message"].endswith("(cell 1, line 1)") and syntax["details"]["cell"] == "cell 1, line 1"


@pytest.mark.parametrize("task, function", [("sdpa", "scaled_dot_product_attention"),
                                            ("mha", "multi_head_attention")])
def test_each_task_has_a_starter_notebook_with_the_py_templates_code(task, function):
    from grader.tasks import template

    data = template_notebook(task)
    nbformat.validate(nbformat.reads(data, as_version=4))
    assert data == template_notebook(task)  # the same file every time (fixed cell ids)
    script = notebook_script(data)
    assert template(task).splitlines()[-1] in script
    assert CellMap.from_script(script).defining_cell(script, function) == 2  # after the spec cell
    assert f"--task {task}" in script and ".ipynb --task" in script


# ---- attn-grader check and template -----------------------------------------------------------

def _cli(*args):
    return subprocess.run([sys.executable, "-m", "grader.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=240)


@pytest.mark.slow
def test_check_grades_a_notebook_and_names_the_cells(tmp_path):
    path = tmp_path / "mine.ipynb"
    path.write_text(crashing_notebook())
    run = _cli("check", str(path), "--task", "sdpa", "--json", "--sandbox", "none")
    assert run.returncode == 1, run.stderr
    report = json.loads(run.stdout)
    assert report["notebook"] == {"function_cell": 3}
    assert report["checks"][0]["id"] == "load.source" and report["checks"][1]["passed"]  # it imported
    tracebacks = [c["details"]["traceback"] for c in report["checks"] if c["details"].get("traceback")]
    assert tracebacks and "(cell 3, line 5)" in tracebacks[0]

    table = _cli("check", str(path), "--task", "sdpa", "--sandbox", "none")
    assert "scaled_dot_product_attention() is defined in cell 3 of" in table.stdout
    assert "(cell 3, line 5)" in table.stdout


def test_check_refuses_a_notebook_with_a_magic_naming_the_cell(tmp_path):
    path = tmp_path / "magic.ipynb"
    path.write_text(notebook(("code", "import torch"), ("code", "%load_ext autoreload")))
    run = _cli("check", str(path), "--task", "sdpa")
    assert run.returncode == 1 and "cell 2 uses an IPython magic on its line 1" in run.stderr
    run = _cli("check", str(path), "--task", "sdpa", "--json")
    assert run.returncode == 1 and "cell 2 uses an IPython magic" in json.loads(run.stdout)["error"]


def test_template_prints_the_starter_notebook():
    run = _cli("template", "mha", "--notebook")
    assert run.returncode == 0 and run.stdout == template_notebook("mha")


# ---- the task page ----------------------------------------------------------------------------

def _upload(client, data: str | bytes, name="mine.ipynb"):
    data = data.encode() if isinstance(data, str) else data
    return client.post("/tasks/sdpa", data={"code": "", "upload": (io.BytesIO(data), name)})


@pytest.mark.slow
def test_a_notebook_uploaded_on_the_page_is_graded_and_its_cells_named(env, ada):
    from grader.grading import grade_source

    response = _upload(ada, crashing_notebook())
    assert response.status_code == 302, response.get_data(as_text=True)[:500]
    assert grade_queued(env, grade_fn=grade_source) == 1
    page = ada.get(response.location).get_data(as_text=True)
    assert re.search(r"<code>scaled_dot_product_attention\(\)</code> is defined in\s+"
                     r"<strong>cell 3</strong>", page)
    assert "(cell 3, line 5)" in page and "mine.ipynb" in page


def test_the_page_refuses_a_notebook_with_a_shell_line_and_offers_a_starter(env, ada):
    page = _upload(ada, notebook(("code", "!pip install torch"))).get_data(as_text=True)
    assert "Not submitted: notebook not accepted: cell 1 uses a shell command" in page
    task_page = ada.get("/tasks/sdpa").get_data(as_text=True)
    assert "/tasks/sdpa/starter.ipynb" in task_page and ".ipynb" in task_page
    starter = ada.get("/tasks/sdpa/starter.ipynb")
    assert starter.headers["Content-Disposition"] == "attachment; filename=sdpa.ipynb"
    assert starter.get_data(as_text=True) == template_notebook("sdpa")


def test_an_oversized_notebook_is_told_to_clear_its_outputs():
    from web.services.submissions import SubmissionRejected, notebook_code

    with pytest.raises(SubmissionRejected, match="clear its outputs") as error:
        notebook_code(notebook(("code", "x = 1\n" + "#" * 3000)), max_bytes=1000)
    assert error.value.status == 413


# ---- attn-grader submit against a running service ---------------------------------------------

@pytest.mark.parametrize("service", ["sqlite"], indirect=True)
def test_submit_sends_a_notebook_and_prints_its_cells(service, tmp_path):
    # `serve` with a grader whose traceback points at the notebook's `raise`
    config = {**service.config, "GRADE_FUNCTION": "test_notebooks:traceback_grade"}
    with running_server(config, workers=1) as (url, _output):
        path = tmp_path / "mine.ipynb"
        path.write_text(crashing_notebook())
        client_env = env_for(config, ATTN_GRADER_TOKEN=service.people["ada"]["token"])
        run = subprocess.run([sys.executable, "-m", "grader.cli", "submit", str(path), "--task", "sdpa",
                              "--server", url], env=client_env, cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        out = " ".join(run.stdout.split())
        assert run.returncode == 1, run.stderr
        assert "scaled_dot_product_attention() is defined in cell 3" in out
        assert 'File "submission.py", line 9 (cell 3, line 5), in f' in run.stdout
        # the table wraps the message: its two halves
        assert "raised RuntimeError at cell 3," in out and "line 5 of the notebook" in out
        assert "[bold]" not in out  # the traceback's heading is markup, its body is not
        magic = tmp_path / "magic.ipynb"
        magic.write_text(notebook(("code", "%pip install torch")))
        run = subprocess.run([sys.executable, "-m", "grader.cli", "submit", str(magic), "--task", "sdpa",
                              "--server", url], env=client_env, cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 1 and "cell 1 uses an IPython magic" in run.stderr
