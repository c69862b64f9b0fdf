"""The web processes' cached question bank follows the files: a change made by one process (the
instructor's edit and "reload" on one gunicorn worker) reaches another that cached the bank."""
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import questions.model as model
from web.services import quizzes

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "attention-flops.yaml"

# Another web process: its bank cached, asked for it once per line on stdin.
OTHER_PROCESS = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import questions.model as model
    model.DEFAULT_BANK = Path(sys.argv[1])
    from web.services import quizzes
    for _ in sys.stdin:
        bank = quizzes.question_bank()
        flops = bank.questions.get("attention-flops")
        print(json.dumps([len(bank), flops.data["title"]["en"] if flops else None]), flush=True)
""")


def _copy_bank(tmp_path) -> Path:
    bank = tmp_path / "bank"
    shutil.copytree(model.DEFAULT_BANK, bank)
    return bank


def test_a_change_reaches_a_process_that_did_not_make_it(tmp_path):
    bank = _copy_bank(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", OTHER_PROCESS, str(bank)], cwd=ROOT, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask():
        other.stdin.write("bank?\n")
        other.stdin.flush()
        return json.loads(other.stdout.readline())

    try:
        count, title = ask()
        assert title == "Operations in one attention head"
        original = (bank / QUESTION).read_text(encoding="utf-8")
        (bank / QUESTION).unlink()  # this process removes a question ...
        assert ask() == [count - 1, None]  # ... and the other one's cache sees it gone
        (bank / QUESTION).write_text(original.replace("Operations in one attention head",
                                                      "FLOPs of one head"), encoding="utf-8")
        assert ask() == [count, "FLOPs of one head"]  # back, as rewritten
    finally:
        other.stdin.close()
        other.wait(timeout=30)


def test_an_unchanged_bank_is_parsed_once(tmp_path, monkeypatch):
    bank = _copy_bank(tmp_path)
    monkeypatch.setattr(model, "DEFAULT_BANK", bank)
    monkeypatch.setattr(quizzes, "_loaded_bank", None)
    loads = []
    real = model.load_bank
    monkeypatch.setattr(model, "load_bank", lambda *a: loads.append(1) or real(*a))
    first = quizzes.question_bank()
    assert quizzes.question_bank() is first and quizzes.question_bank() is first and len(loads) == 1
    (bank / QUESTION).write_text((bank / QUESTION).read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert quizzes.question_bank() is not first and len(loads) == 2
