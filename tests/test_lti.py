"""LTI 1.3 end to end on loopback: the tool (pylti1p3) against an independent platform
(``lti1p3platform``, see ``lti_platform.py``), both served over HTTP on 127.0.0.1, with a
``requests`` session as the user's browser.

launch → submit (through the task page, CSRF on) → graded (the real job claim path, fake
grader) → score sent by the passback sender → received and applied by the platform.
"""
from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
import requests

from lti_platform import INSTRUCTOR, LEARNER, LiveServer, Platform, platform_app
from pages_support import db_session, grade_queued, make_env


@pytest.fixture
def lti(tmp_path):
    from web.db import dispose_engines
    from web.lti import platforms

    env = make_env(tmp_path, WTF_CSRF_ENABLED=True)
    tool = LiveServer(env.app).start()
    platform = Platform(tool_url=tool.url)
    lms = LiveServer(platform_app(platform))
    platform.url = lms.url
    lms.start()
    platform.users.update({
        "lms-ada": {"name": "Ada L.", "email": "ada.lms@example.edu", "roles": [LEARNER]},
        "lms-prof": {"name": "Prof. P.", "email": "prof.lms@example.edu", "roles": [INSTRUCTOR]},
        "lms-gone": {"name": "Gone", "email": "gone@example.edu", "roles": [LEARNER],
                     "status": "Inactive"},
    })
    with db_session(env) as session:
        platforms.add_platform(session, allow_http=True, **platform.tool_registration())
        session.commit()
    yield env, tool, platform
    lms.stop()
    tool.stop()
    dispose_engines()


def _form(html: str, form_id: str | None = None) -> tuple[str, dict]:
    """The action and hidden fields of the page's first form (or the one with ``form_id``)."""
    if form_id:
        html = html[html.index(f'id="{form_id}"') - 6:]
    html = html[html.index("<form"):html.index("</form>")]
    action = re.search(r'<form[^>]*action="([^"]+)"', html).group(1)
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', html))
    return action.replace("&amp;", "&"), fields


def _csrf(html: str) -> str:
    return re.search(r'name="csrf_token" type="hidden" value="([^"]+)"|'
                     r'name="csrf_token" value="([^"]+)"', html).group(0).split('value="')[1][:-1]


def launch(browser: requests.Session, platform: Platform, user: str, **hint):
    """The user clicks the link in the LMS: OIDC login, authorization, the launch POST."""
    params = {"user": user, **{k: json.dumps(v) if isinstance(v, dict) else v
                               for k, v in hint.items()}}
    page = browser.get(f"{platform.url}/start", params=params)
    assert page.status_code == 200, page.text
    action, fields = _form(page.text)
    return browser.post(action, data=fields, allow_redirects=False)


def submit(browser: requests.Session, tool: LiveServer, path: str, code: str):
    page = browser.get(tool.url + path)
    assert page.status_code == 200
    return browser.post(tool.url + path, data={"csrf_token": _csrf(page.text), "code": code},
                        allow_redirects=False)


def send(env, **kw):
    from web.lti.passback import send_due

    return send_due(env.engine, **kw)


def test_launch_submit_grade_and_the_platform_receives_the_best_score(lti):
    env, tool, platform = lti
    browser = requests.Session()
    response = launch(browser, platform, "lms-ada", link="link-sdpa", lineitem="li-sdpa",
                      custom={"attn_grader_assignment": "sdpa"})
    assert response.status_code == 303, response.text
    assert response.headers["Location"].endswith("/tasks/sdpa")

    assert submit(browser, tool, "/tasks/sdpa", "# SCORE=7\n").status_code == 302
    assert grade_queued(env) == 1
    report = send(env)
    assert len(report.sent) == 1 and not report.retrying
    [score] = platform.scores_for("lms-ada")
    assert (score["scoreGiven"], score["scoreMaximum"]) == (7.0, 10.0)
    assert score["lineitem"] == "li-sdpa"
    assert score["activityProgress"] == "Completed" and score["gradingProgress"] == "FullyGraded"

    # A worse submission changes nothing; a better one is sent, with a later timestamp.
    submit(browser, tool, "/tasks/sdpa", "# SCORE=5\n")
    submit(browser, tool, "/tasks/sdpa", "# SCORE=9\n")
    assert grade_queued(env) == 2
    assert len(send(env).sent) == 1
    first, second = platform.scores_for("lms-ada")
    assert second["scoreGiven"] == 9.0 and second["timestamp"] > first["timestamp"]
    assert send(env).sent == []  # nothing new: nothing sent twice

    from web.models import User
    with db_session(env) as session:
        user = session.query(User).filter_by(email="ada.lms@example.edu").one()
        assert user.role == "student" and user.password_hash is None


def test_a_second_registration_of_the_same_lms_reaches_the_same_account(lti):
    """LTI's ``sub`` is unique per issuer: after the LMS registers the tool again (dynamic
    registration beside the manual one), its students keep their accounts and scores, and
    their best score goes to the new registration's links (review 3, M3)."""
    from web.lti import platforms
    from web.lti.models import LtiPlatform, LtiUser
    from web.models import User

    env, tool, platform = lti
    browser = requests.Session()
    launch(browser, platform, "lms-ada", link="link-sdpa", lineitem="li-sdpa",
           custom={"attn_grader_assignment": "sdpa"})
    submit(browser, tool, "/tasks/sdpa", "# SCORE=7\n")
    assert grade_queued(env) == 1
    with db_session(env) as session:
        first = session.query(LtiPlatform).one()
        first.client_id = "the-manual-registration"  # the LMS now launches as another client
        platforms.add_platform(session, allow_http=True, **platform.tool_registration())
        session.commit()

    again = requests.Session()
    response = launch(again, platform, "lms-ada", link="link-sdpa-2", lineitem="li-sdpa-2",
                      custom={"attn_grader_assignment": "sdpa"})
    assert response.status_code == 303
    assert "Attempt 1" in again.get(tool.url + "/submissions/1").text  # her own, earlier work
    assert len(send(env).sent) == 2  # her best score, to both registrations' links
    assert sorted(s["lineitem"] for s in platform.scores_for("lms-ada")) == ["li-sdpa", "li-sdpa-2"]
    with db_session(env) as session:
        [person] = session.query(LtiUser).all()
        assert (person.issuer, person.sub) == (platform.url, "lms-ada")
        assert person.platform.client_id == "attn-grader-client"  # the last registration used
        assert session.query(User).filter(User.email.like("%lti.invalid")).count() == 0


def test_scores_wait_while_the_lms_is_down_and_arrive_in_order_when_it_is_back(lti):
    from web.lti.models import LtiScoreSync
    from web.models import utcnow

    env, tool, platform = lti
    browser = requests.Session()
    launch(browser, platform, "lms-ada", link="link-sdpa", lineitem="li-sdpa",
           custom={"attn_grader_assignment": "sdpa"})
    platform.down = True
    submit(browser, tool, "/tasks/sdpa", "# SCORE=6\n")
    grade_queued(env)
    failed = send(env)
    assert failed.sent == [] and len(failed.retrying) == 1
    assert "503" in next(iter(failed.errors.values()))
    assert send(env).retrying == []  # backing off: not due again yet

    submit(browser, tool, "/tasks/sdpa", "# SCORE=8\n")  # a new best while it is still down
    grade_queued(env)
    assert len(send(env, now=utcnow() + timedelta(seconds=30)).retrying) == 1
    with db_session(env) as session:
        row = session.query(LtiScoreSync).one()
        assert (row.attempts, row.version, row.sent_version) == (2, 2, 0)
        assert "503" in row.last_error

    platform.down = False
    assert len(send(env, now=utcnow() + timedelta(hours=2)).sent) == 1
    assert [s["scoreGiven"] for s in platform.scores_for("lms-ada")] == [8.0]
    with db_session(env) as session:
        row = session.query(LtiScoreSync).one()
        assert (row.attempts, row.sent_version, row.last_error) == (0, 2, None)


def test_a_late_sender_cannot_overwrite_a_newer_score(lti):
    """A sender whose lease expired posts an older score after the newer one landed: the
    platform drops it by timestamp, and the outbox stays at the newer version."""
    from web.lti import passback
    from web.lti.models import LtiScoreSync
    from web.models import utcnow

    env, tool, platform = lti
    browser = requests.Session()
    launch(browser, platform, "lms-ada", link="link-sdpa", lineitem="li-sdpa",
           custom={"attn_grader_assignment": "sdpa"})
    submit(browser, tool, "/tasks/sdpa", "# SCORE=4\n")
    grade_queued(env)
    with db_session(env) as session:
        row_id = session.query(LtiScoreSync.id).scalar()
    slow = passback._claim(env.engine, row_id, lease_seconds=1, now=utcnow())

    submit(browser, tool, "/tasks/sdpa", "# SCORE=10\n")
    grade_queued(env)
    assert len(send(env, now=utcnow() + timedelta(seconds=5)).sent) == 1  # lease expired

    with db_session(env) as session:  # the slow sender wakes up and delivers version 1
        passback._deliver(session, passback._Connectors(session), slow)
    passback._sent(env.engine, slow)
    assert [s["scoreGiven"] for s in platform.scores_for("lms-ada")] == [10.0]
    assert [r[1]["scoreGiven"] for r in platform.rejected] == [4.0]
    with db_session(env) as session:
        row = session.get(LtiScoreSync, row_id)
        assert (row.version, row.sent_version, row.score_given) == (2, 2, 10.0)


def test_deep_linking_places_an_assignment_with_its_line_item(lti):
    env, tool, platform = lti
    browser = requests.Session()
    response = launch(browser, platform, "lms-prof", kind="deeplink")
    assert response.status_code == 303, response.text
    picker_url = tool.url + response.headers["Location"]
    page = browser.get(picker_url)
    assert page.status_code == 200 and 'value="sdpa"' in page.text
    other = requests.Session()  # another instructor's browser cannot answer this selection
    launch(other, platform, "lms-prof", link="link-x", custom={"attn_grader_assignment": "quiz"})
    assert other.get(picker_url).status_code == 404
    # Any subset may be ticked: no checkbox is `required` (the browser would then demand all),
    # and "none" is refused by the server in words.
    assert re.findall(r'<input[^>]*name="assignments"[^>]*>', page.text)
    assert not re.search(r'<input[^>]*name="assignments"[^>]*required', page.text)
    empty = browser.post(picker_url, data={"csrf_token": _csrf(page.text)})
    assert empty.status_code == 200 and "Tick at least one assignment." in empty.text
    back = browser.post(picker_url, data={"csrf_token": _csrf(page.text),
                                          "assignments": ["sdpa", "quiz"]})
    assert back.status_code == 200
    assert "form-action 'self' " + platform.url in back.headers["Content-Security-Policy"]
    action, fields = _form(back.text, "lti-deep-link-return")
    assert action == f"{platform.url}/deep-link-return"
    accepted = browser.post(action, data=fields)
    assert accepted.status_code == 200, accepted.text
    assert browser.get(picker_url).status_code == 404  # answered: it cannot be sent twice
    sdpa, quiz = platform.deep_link_items
    assert sdpa["type"] == "ltiResourceLink" and sdpa["url"] == f"{tool.url}/lti/launch"
    assert sdpa["custom"] == {"attn_grader_assignment": "sdpa"}
    assert sdpa["lineItem"]["scoreMaximum"] == 100 and sdpa["lineItem"]["resourceId"] == "sdpa"
    assert quiz["custom"] == {"attn_grader_assignment": "quiz"}

    # The LMS then launches the placed link with that custom parameter; the platform gave it
    # no line item of its own, so the tool creates one through AGS by resource id.
    student = requests.Session()
    response = launch(student, platform, "lms-ada", link="placed-1", custom=sdpa["custom"])
    assert response.headers["Location"].endswith("/tasks/sdpa")
    submit(student, tool, "/tasks/sdpa", "# SCORE=3\n")
    grade_queued(env)
    assert len(send(env).sent) == 1
    [item] = platform.lineitems.values()
    assert item["resourceId"] == "sdpa" and item["resourceLinkId"] == "placed-1"
    assert platform.scores_for("lms-ada")[0]["scoreGiven"] == 3.0


def test_a_student_cannot_open_content_selection_and_bad_launches_are_refused(lti):
    env, tool, platform = lti
    response = launch(requests.Session(), platform, "lms-ada", kind="deeplink")
    assert response.status_code == 400 and "only course staff" in response.text

    unplaced = launch(requests.Session(), platform, "lms-ada", link="unknown-link")
    assert unplaced.status_code == 400 and "attn_grader_assignment" in unplaced.text

    browser = requests.Session()
    page = browser.get(f"{platform.url}/start", params={"user": "lms-ada", "link": "x"})
    action, fields = _form(page.text)
    header, body, signature = fields["id_token"].split(".")
    forged = browser.post(action, data={**fields, "id_token": f"{header}.{body}.{signature[::-1]}"})
    # Refusals say what happened and what to do; the library's words stay as a detail.
    assert forged.status_code == 400 and "it may have been altered" in forged.text
    assert "decode id_token: " in forged.text  # padding or signature, as the reversed bytes fall  # the detail, for whoever looks into it
    assert "Open the activity again from your course" in forged.text
    other_state = browser.post(action, data={"id_token": fields["id_token"],
                                             "state": "state-other"})
    assert other_state.status_code == 400 and "did not start here" in other_state.text

    # A launch works once: posting the same signed token again is refused (nonce used up).
    page = browser.get(f"{platform.url}/start", params={
        "user": "lms-ada", "link": "link-sdpa", "custom": '{"attn_grader_assignment": "sdpa"}'})
    action, fields = _form(page.text)
    assert browser.post(action, data=fields, allow_redirects=False).status_code == 303
    replay = requests.Session().post(action, data=fields, allow_redirects=False)
    replay_same_browser = browser.post(action, data=fields, allow_redirects=False)
    assert replay.status_code == 400 and "State not found" in replay.text  # state used up
    assert replay_same_browser.status_code == 400 and "Invalid Nonce" in replay_same_browser.text
    assert "This launch link was already used." in replay_same_browser.text
    russian = requests.post(action, data=fields, headers={"Accept-Language": "ru"})
    assert "Откройте задание заново со страницы курса в LMS." in russian.text  # reader's language


def test_roster_sync_enrolls_active_members_and_drops_inactive_ones(lti):
    from web.lti import roster
    from web.lti.models import LtiContext, LtiUser
    from web.models import Enrollment, User

    env, tool, platform = lti
    staff = requests.Session()
    launch(staff, platform, "lms-prof", link="link-sdpa",
           custom={"attn_grader_assignment": "sdpa"})
    page = staff.get(f"{tool.url}/instructor/lti")  # the LMS instructor is an instructor here
    assert page.status_code == 200 and "Attention, spring term" in page.text
    synced = staff.post(f"{tool.url}/instructor/lti/contexts/1/roster",
                        data={"csrf_token": _csrf(page.text)})
    assert "Roster synced: 2 active members (1 staff), 0 enrollments removed" in synced.text
    with db_session(env) as session:
        context = session.query(LtiContext).one()
        assert context.memberships_url == f"{platform.url}/memberships"
        result = roster.sync_roster(session, context)
        session.commit()
        assert (result.enrolled, result.instructors) == (2, 1)
        subs = {link.sub: link.user for link in session.query(LtiUser)}
        assert set(subs) == {"lms-ada", "lms-prof"}
        assert subs["lms-prof"].role == "instructor" and subs["lms-ada"].role == "student"
        enrolled = {e.user_id for e in session.query(Enrollment).filter_by(
            course_id=context.course_id)}
        assert {subs["lms-ada"].id, subs["lms-prof"].id} <= enrolled

        platform.users["lms-ada"]["status"] = "Deleted"
        assert roster.sync_roster(session, context).removed == 1
        session.commit()
        assert session.query(Enrollment).filter_by(course_id=context.course_id,
                                                   user_id=subs["lms-ada"].id).count() == 0
        assert session.query(User).filter_by(email="ada.lms@example.edu").count() == 1


def test_a_canvas_launch_fills_the_canvas_gradebook_csv(lti):
    """What a Canvas launch says of the student and the assignment (its variable
    substitutions, the LIS claim, the name parts) is stored and fills the Canvas CSV: the
    Student as "Last, First", ID, SIS User ID, SIS Login ID, Section, and the column of the
    assignment placed in Canvas named with Canvas's assignment id. The roster keeps them."""
    import csv
    import io

    env, tool, platform = lti
    platform.users["lms-ada"]["claims"] = {
        "given_name": "Ada", "family_name": "King Lovelace",
        "https://purl.imsglobal.org/spec/lti/claim/lis": {"person_sourcedid": "SIS-0815"}}
    platform.users["lms-ada"]["member"] = {"lis_person_sourcedid": "SIS-0815"}
    browser = requests.Session()
    custom = {"attn_grader_assignment": "sdpa", "canvas_user_id": "4242",
              "canvas_user_login_id": "ada.l", "canvas_assignment_id": "777",
              "canvas_section_names": '["Section A","Section B"]',
              "canvas_user_sis_id": "$Canvas.user.sisSourceId"}  # not substituted: ignored
    assert launch(browser, platform, "lms-ada", link="link-sdpa", custom=custom).status_code == 303
    assert submit(browser, tool, "/tasks/sdpa", "# SCORE=7\n").status_code == 302
    assert grade_queued(env) == 1

    staff = requests.Session()  # the LMS's instructor, signed in by a launch
    launch(staff, platform, "lms-prof", link="link-sdpa", custom={"attn_grader_assignment": "sdpa"})

    def canvas_rows():
        return list(csv.reader(io.StringIO(staff.get(f"{tool.url}/instructor/scores.csv?layout=canvas").text)))

    header, points, *students = canvas_rows()
    assert header[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    sdpa = next(i for i, title in enumerate(header) if title.endswith("(777)"))
    assert points[0].strip() == "Points Possible" and points[sdpa] == "10"
    ada = next(r for r in students if r[1] == "4242")
    assert ada[:5] == ["King Lovelace, Ada", "4242", "SIS-0815", "ada.l", "Section A, Section B"]
    assert ada[sdpa] == "7"
    local = next(r for r in students if r[3] == "ada@example.org")  # no LMS identity known
    assert local[1:5] == ["", "", "ada@example.org", ""]

    # a roster sync (its members carry no custom fields) keeps what the launch said
    from web.lti import roster
    from web.lti.models import LtiContext
    with db_session(env) as session:
        roster.sync_roster(session, session.query(LtiContext).one())
        session.commit()
    ada_again = next(r for r in canvas_rows()[2:] if r[1] == "4242")
    assert ada_again[:5] == ada[:5]


def test_jwks_publishes_the_key_the_platform_verifies(lti):
    env, tool, platform = lti
    keys = requests.get(f"{tool.url}/lti/jwks").json()["keys"]
    assert len(keys) == 1 and keys[0]["alg"] == "RS256" and keys[0]["kid"]
    assert "d" not in keys[0]  # public half only
    # (The platform's token endpoint verified assertions signed with it in the tests above.)
    # After a rotation the old key stays published, after the new signing key.
    from web.lti.keys import rotate_key
    with db_session(env) as session:
        rotate_key(session)
        session.commit()
    assert [k["kid"] for k in requests.get(f"{tool.url}/lti/jwks").json()["keys"]][1] \
        == keys[0]["kid"]


@pytest.mark.slow
def test_the_real_grader_and_the_services_own_sender_deliver_a_full_score(lti):
    """The real grader (sandbox auto) grades a correct file; nobody calls send_due: the
    supervisor that ``serve`` and ``attn-grader worker`` run sends the score by itself."""
    from pathlib import Path

    from service_support import wait_until
    from web.dispatch.supervisor import Supervisor
    from web.dispatch.worker import GradingWorker
    from web.housekeeping import host_round
    from web.services.grading import load_grade_function

    env, tool, platform = lti
    browser = requests.Session()
    launch(browser, platform, "lms-ada", link="link-sdpa", lineitem="li-sdpa",
           custom={"attn_grader_assignment": "sdpa"})
    correct = Path(__file__).parent.parent / "grader" / "tasks" / "sdpa" / "corpus" / "correct" / "matmul_softmax.py"
    assert submit(browser, tool, "/tasks/sdpa", correct.read_text()).status_code == 302
    config = {**env.config, "SANDBOX": "auto"}
    worker = GradingWorker(env.engine, config,
                           grade_fn=load_grade_function("grader.grading:grade_source"))
    assert worker.run_once(("cpu",)) == "done"

    supervisor = Supervisor(config, [], housekeeping=host_round)  # serve --workers 0
    supervisor.start()
    try:
        [score] = wait_until(lambda: platform.scores_for("lms-ada"), timeout=30,
                             what="the supervisor's passback to reach the LMS")
    finally:
        supervisor.stop()
    assert score["scoreGiven"] == score["scoreMaximum"] == 100.0
