"""LTI is a plug-in of the app (code review 2, circle 5): the core does not import it, and
its passback hooks act only on the sessions of the databases it was installed for."""
from __future__ import annotations

import subprocess
import sys

from pages_support import db_session, make_env


def test_importing_the_core_wires_in_no_lti():
    code = ("import sys, sqlalchemy.event as e, sqlalchemy.orm as o; import web.models, "
            "web.services.courses; "
            "print(any(m.startswith('web.lti') for m in sys.modules), "
            "e.contains(o.Session, 'after_flush', getattr(sys.modules.get('web.lti.hooks'), "
            "'_note_changed_scores', None) or (lambda *a: None)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_hooks_queue_passback_only_for_the_apps_database(tmp_path):
    from sqlalchemy.orm import Session

    from web.db import dispose_engines, get_engine, upgrade
    from web.lti.models import LtiPlatform, LtiResourceLink, LtiScoreSync, LtiUser
    from web.models import Assignment, Course, Submission, User

    (tmp_path / "app").mkdir()
    env = make_env(tmp_path / "app")
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    upgrade(other_url)
    try:
        for engine, expected in ((env.engine, 1), (get_engine(other_url), 0)):
            with Session(bind=engine) as session:
                course = session.query(Course).first() or Course(slug="c", title="C")
                task = Assignment(course=course, slug="t-x", title="T", kind="code")
                ada = User(email=f"ada-{expected}@x", name="Ada", role="student")
                platform = LtiPlatform(name="L", issuer="https://lms", client_id="c",
                                       auth_login_url="https://lms/a", auth_token_url="https://lms/t",
                                       key_set_url="https://lms/k", deployment_ids=[])
                session.add_all([task, ada, platform,
                                 LtiUser(issuer="https://lms", platform=platform, sub="1", user=ada),
                                 LtiResourceLink(platform=platform, resource_link_id="r",
                                                 deployment_id="d", assignment=task,
                                                 ags={"scope": [hooks_scope()], "lineitem": "x"})])
                session.commit()
                session.add(Submission(assignment=task, user=ada, task_id="t-x", code="",
                                       code_sha256="0" * 64, status="done", score=5,
                                       max_score=10))
                session.commit()
                assert session.query(LtiScoreSync).count() == expected, engine.url
    finally:
        dispose_engines()


def hooks_scope() -> str:
    from web.lti.passback import SCORE_SCOPE
    return SCORE_SCOPE
