"""Instructor pages and exports issue a fixed number of queries, whatever the course size.

A page that loads rows one by one (an "N+1") is fast in a demo and unusable with 1,000
students. Each page is requested on a small seeded course, the course is grown tenfold, and
the page must issue exactly as many SQL statements as before.
"""
import importlib.util
import shutil

import pytest
from sqlalchemy import event, select

from service_support import ROOT, make_config
from web import create_app
from web.db import dispose_engines, get_engine, session_factory
from web.models import Submission

_spec = importlib.util.spec_from_file_location("seed_large", ROOT / "scripts" / "seed_large.py")
seed_large = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(seed_large)

PAGES = ["/instructor/", "/instructor/scores.csv", "/instructor/scores.csv?layout=moodle",
         "/instructor/assignments/sdpa", "/instructor/assignments/mha",
         "/instructor/assignments/quiz", "/instructor/charts/sdpa/scores.svg",
         "/instructor/charts/sdpa/failures.svg", "/instructor/grading", "/instructor/jobs",
         "/instructor/submissions/{newest}"]
API = ["/api/v1/scores", "/api/v1/scores.csv", "/metrics", "/healthz"]


class QueryCounter:
    def __init__(self, engine):
        self.engine, self.count = engine, 0
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, *_):
        self.count += 1

    def close(self):
        event.remove(self.engine, "before_cursor_execute", self._seen)


@pytest.fixture
def course(tmp_path, _seeded_sqlite):
    template, people = _seeded_sqlite
    shutil.copy(template, tmp_path / "grader.db")
    config = make_config(tmp_path, f"sqlite:///{tmp_path / 'grader.db'}", PAGES=True)
    engine = get_engine(config["DATABASE_URL"])
    try:
        app = create_app(config)
    except ImportError as exc:
        pytest.skip(f"the HTML pages cannot be imported yet: {exc}")
    counter = QueryCounter(engine)
    yield app, engine, people, counter
    counter.close()
    dispose_engines()


def _counts(app, engine, people, counter) -> dict:
    client = app.test_client()
    with client.session_transaction() as session:  # signed in as the instructor
        session["_user_id"] = str(people["prof"]["id"])
        session["_fresh"] = True
    with session_factory(engine)() as db:
        newest = db.scalar(select(Submission.id).order_by(Submission.id.desc()))
    token = {"Authorization": f"Bearer {people['prof']['token']}"}
    counts = {}
    for path in PAGES + API:
        url = path.format(newest=newest)
        counter.count = 0
        response = client.get(url, headers=token if path in API else {})
        assert response.status_code == 200, (url, response.status_code)
        counts[path] = counter.count
    return counts


def test_instructor_pages_do_not_query_per_student_or_submission(course):
    app, engine, people, counter = course
    seed_large.seed_large(engine, students=20, submissions=100, seed=1, log=lambda *_: None)
    small = _counts(app, engine, people, counter)
    seed_large.seed_large(engine, students=180, submissions=900, seed=2, log=lambda *_: None)
    large = _counts(app, engine, people, counter)
    grew = {path: (small[path], large[path]) for path in small if large[path] != small[path]}
    assert not grew, f"queries per page grew with the course (small, 10x): {grew}"
    assert max(large.values()) <= 15, large


def test_seed_script_refuses_an_unmigrated_database(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    assert seed_large.main(["--students", "2", "--submissions", "3", "--database-url", url]) == 2
    assert "attn-grader db upgrade" in capsys.readouterr().err


def test_a_students_pages_do_not_query_per_own_submission(course):
    from service_support import fake_grade
    from web.dispatch.worker import GradingWorker
    from web.models import User
    from web.services.courses import find_assignment
    from web.services.submissions import submit

    app, engine, people, counter = course
    worker = GradingWorker(engine, app.config, grade_fn=fake_grade, name="qc")

    def add(n):
        with session_factory(engine)() as db:
            ada = db.get(User, people["ada"]["id"])
            for i in range(n):
                submit(db, ada, find_assignment(db, "sdpa"), f"# SCORE={i % 10}\n")
        while worker.run_once(["cpu"]):
            pass

    def counts():
        client = app.test_client()
        with client.session_transaction() as session:
            session["_user_id"] = str(people["ada"]["id"])
        with session_factory(engine)() as db:
            newest = db.scalar(select(Submission.id).order_by(Submission.id.desc()))
        seen = {}
        for path in ("/", "/tasks/sdpa", f"/submissions/{newest}",
                     f"/submissions/{newest}/status.json", "/quiz/quiz"):
            counter.count = 0
            assert client.get(path).status_code == 200, path
            seen[path.replace(str(newest), "{id}")] = counter.count
        return seen

    add(2)
    few = counts()
    add(20)
    many = counts()
    assert few == many, f"queries grew with the student's own submissions: {few} -> {many}"


def test_the_api_result_view_reads_the_same_few_statements_however_often_regraded(course):
    """Every client that waits for a result ends with this view (``attn-grader submit``, the
    LMS tools): the token with its owner, the status, the row with its job, assignment and
    results, and the newest result's checks. A regrade adds a result, not a statement."""
    from service_support import fake_grade
    from web.dispatch.worker import GradingWorker
    from web.models import User
    from web.services.courses import find_assignment
    from web.services.regrade import queue_regrades
    from web.services.submissions import submit

    app, engine, people, counter = course
    worker = GradingWorker(engine, app.config, grade_fn=fake_grade, name="qc")
    with session_factory(engine)() as db:
        ada = db.get(User, people["ada"]["id"])
        sid = submit(db, ada, find_assignment(db, "sdpa"), "# SCORE=7\n").id
    while worker.run_once(["cpu"]):
        pass
    client = app.test_client()
    token = {"Authorization": f"Bearer {people['ada']['token']}"}

    def statements(path):
        counter.count = 0
        response = client.get(path, headers=token)
        assert response.status_code == 200 and response.get_json()["status"] == "done", path
        return counter.count

    first = {p: statements(p) for p in (f"/api/v1/submissions/{sid}",
                                         f"/api/v1/submissions/{sid}?wait=30")}
    assert max(first.values()) <= 5, first  # those four and SQLite's BEGIN
    for _ in range(2):
        with session_factory(engine)() as db:
            queue_regrades(db, [db.get(Submission, sid)])
        while worker.run_once(["cpu"]):
            pass
    again = {p: statements(p) for p in first}
    assert again == first, f"statements grew with the regrades: {first} -> {again}"


def test_the_api_task_list_reads_the_same_statements_however_many_tasks(course):
    """``attn-grader tasks`` lists each task with the student's attempts so far: counted for
    every task in one statement, not one count per task."""
    from web.models import Assignment, User
    from web.services.courses import default_course, find_assignment
    from web.services.submissions import submit

    app, engine, people, counter = course
    client = app.test_client()
    token = {"Authorization": f"Bearer {people['ada']['token']}"}

    def statements():
        counter.count = 0
        response = client.get("/api/v1/tasks", headers=token)
        assert response.status_code == 200
        return counter.count, {t["assignment"]: t["attempts_used"] for t in response.get_json()["tasks"]}

    before, _ = statements()
    with session_factory(engine)() as db:
        course_row = default_course(db)
        for n in range(3):
            db.add(Assignment(course_id=course_row.id, slug=f"sdpa-extra-{n}", title=f"Extra {n}",
                              kind="task", task_id="sdpa", position=100 + n))
        db.commit()
        ada = db.get(User, people["ada"]["id"])
        submit(db, ada, find_assignment(db, "sdpa-extra-1"), "# SCORE=7\n")
    after, used = statements()
    assert after == before, f"statements grew with the tasks: {before} -> {after}"
    assert (used["sdpa-extra-0"], used["sdpa-extra-1"]) == (0, 1)
