"""LTI launches inside the LMS's own page (an iframe), against the independent platform of
``lti_platform.py``: the browser keeps no cookie of the tool (a third party there), so the
OIDC state is checked without its cookie and the framed pages carry a signed frame-session
token; only the registered platform's origins may frame them.

The "browser" here is a ``requests`` session that accepts no cookie at all and says
``Sec-Fetch-Dest: iframe``, as a browser does for a frame's navigations.
"""
from __future__ import annotations

import re
from http.cookiejar import DefaultCookiePolicy

import pytest
import requests

from pages_support import db_session, grade_queued
from test_lti import _csrf, _form, lti  # noqa: F401 (the fixture)

FRAME = {"Sec-Fetch-Dest": "iframe"}


def _frame_browser() -> requests.Session:
    browser = requests.Session()
    browser.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))  # third party: none kept
    browser.headers.update(FRAME)
    return browser


def _framed_launch(browser, platform, user, **hint):
    page = browser.get(f"{platform.url}/start", params={"user": user, **hint})
    assert page.status_code == 200, page.text
    action, fields = _form(page.text)
    return browser.post(action, data=fields, allow_redirects=False), (action, fields)


def _frame_ancestors(response) -> str:
    return re.search(r"frame-ancestors ([^;]+)", response.headers["Content-Security-Policy"]).group(1)


def test_content_selection_in_the_lms_dialog_without_cookies(lti):
    env, tool, platform = lti
    browser = _frame_browser()
    response, (action, fields) = _framed_launch(browser, platform, "lms-prof", kind="deeplink")
    assert response.status_code == 303, response.text
    # One cookie only, the frame session's partitioned binding (a browser without CHIPS drops it)
    [cookie] = response.raw.headers.getlist("Set-Cookie")
    assert cookie.startswith("attn_frame_")
    assert {"Secure", "HttpOnly", "SameSite=None", "Partitioned"} <= {
        part.strip() for part in cookie.split(";")}
    picker_url = tool.url + response.headers["Location"]
    token = re.search(r"lti_frame=([^&]+)", picker_url).group(1)

    page = browser.get(picker_url)
    assert page.status_code == 200 and 'value="sdpa"' in page.text
    assert _frame_ancestors(page) == platform.url  # the platform's origin, and only it
    assert "X-Frame-Options" not in page.headers
    form_action = re.search(r'<form method="post" action="([^"]+)" class="card"', page.text).group(1)
    form_token = re.search(r"lti_frame=([^&]+)", form_action.replace("&amp;", "&")).group(1)
    assert form_token != token  # each page's links carry a fresh token of the same session

    # The token is the authority: without it, or with one altered, the page is not served.
    assert requests.get(picker_url.split("?")[0], allow_redirects=False).status_code == 302
    forged = picker_url.replace(token, token[:-2] + ("AA" if token[-2:] != "AA" else "BB"))
    assert browser.get(forged, allow_redirects=False).status_code == 302  # to the sign-in page
    # Pages outside the frame session keep frame-ancestors 'none'.
    assert _frame_ancestors(requests.get(f"{tool.url}/sign-in")) == "'none'"

    back = browser.post(tool.url + form_action.replace("&amp;", "&"),
                        data={"csrf_token": _csrf(page.text), "assignments": ["quiz"]})
    assert back.status_code == 200, back.text
    policy = back.headers["Content-Security-Policy"]
    assert f"form-action 'self' {platform.url}" in policy and _frame_ancestors(back) == platform.url
    return_action, return_fields = _form(back.text, "lti-deep-link-return")
    assert browser.post(return_action, data=return_fields).status_code == 200
    [item] = platform.deep_link_items
    assert item["custom"] == {"attn_grader_assignment": "quiz"}
    assert "lti_frame" not in item["url"]  # the placed link is the plain launch URL
    # Single use: the same selection cannot be answered again with the same token.
    assert browser.post(tool.url + form_action.replace("&amp;", "&"),
                        data={"csrf_token": _csrf(page.text), "assignments": ["sdpa"]}
                        ).status_code == 404
    # The cookie-less state worked once: the same launch posted again is refused.
    again = browser.post(action, data=fields, allow_redirects=False)
    assert again.status_code == 400 and "did not start here" in again.text
    assert _frame_ancestors(again) == platform.url  # the refusal is readable in the dialog


def test_an_embedded_student_submits_sees_the_grade_and_takes_the_quiz(lti):
    from web.lti.models import LtiScoreSync

    env, tool, platform = lti
    browser = _frame_browser()
    response, _ = _framed_launch(browser, platform, "lms-ada", link="link-sdpa",
                                 lineitem="li-sdpa", custom='{"attn_grader_assignment": "sdpa"}')
    assert response.status_code == 303, response.text
    task_url = tool.url + response.headers["Location"]
    assert "/tasks/sdpa?lti_frame=" in task_url
    page = browser.get(task_url)
    assert page.status_code == 200 and _frame_ancestors(page) == platform.url
    submitted = browser.post(task_url, data={"csrf_token": _csrf(page.text), "code": "# SCORE=7\n"},
                             allow_redirects=False)
    assert submitted.status_code == 302 and "lti_frame=" in submitted.headers["Location"]
    assert grade_queued(env) == 1
    result = browser.get(tool.url + submitted.headers["Location"]
                         if submitted.headers["Location"].startswith("/")
                         else submitted.headers["Location"])
    assert result.status_code == 200 and re.search(r"7\s*/\s*10", result.text)
    status_url = re.search(r'data-status-url="([^"]+)"', result.text).group(1)
    assert "lti_frame=" in status_url  # the page's own polling carries the token too

    # The quiz, in the same frame: its links and forms carry the token.
    quiz = browser.get(f"{tool.url}/quiz/quiz", params={"lti_frame": task_url.split("lti_frame=")[1]})
    start = re.search(r'<form method="post" action="([^"]*/quiz/quiz/start[^"]*)"', quiz.text)
    assert start and "lti_frame=" in start.group(1)
    opened = browser.post(tool.url + start.group(1).replace("&amp;", "&"),
                          data={"csrf_token": _csrf(quiz.text)})
    submit = re.search(r'id="submit-quiz"', opened.text) and re.search(
        r'<form method="post" action="([^"]+)" class="actions" id="submit-quiz"', opened.text)
    assert submit and "lti_frame=" in submit.group(1)
    done = browser.post(tool.url + submit.group(1).replace("&amp;", "&"),
                        data={"csrf_token": _csrf(opened.text), "confirmed": "yes"})
    assert done.status_code == 200 and "/quiz/attempts/" in done.url
    with db_session(env) as session:
        assert session.query(LtiScoreSync).count() == 1  # the task's 7/10 (quiz not linked)


# ---- a real browser: the LMS on localhost, the tool on 127.0.0.1 (two sites) ----------------

@pytest.fixture
def two_sites(tmp_path):
    from browser_support import CHROMIUM_ARGS, _playwright
    from lti_platform import INSTRUCTOR, LEARNER, LiveServer, Platform, platform_app
    from pages_support import make_env
    from web.db import dispose_engines
    from web.lti import platforms

    sync_playwright = _playwright()
    env = make_env(tmp_path, WTF_CSRF_ENABLED=True)
    tool = LiveServer(env.app).start()
    platform = Platform(tool_url=tool.url)
    lms = LiveServer(platform_app(platform))
    platform.url = lms.url.replace("127.0.0.1", "localhost")  # another site for the browser
    lms.start()
    platform.users["lms-ada"] = {"name": "Ada L.", "email": "ada.lms@example.edu",
                                 "roles": [LEARNER]}
    platform.users["lms-prof"] = {"name": "Prof. P.", "email": "prof.lms@example.edu",
                                  "roles": [INSTRUCTOR]}
    with db_session(env) as session:
        platforms.add_platform(session, allow_http=True, **platform.tool_registration())
        session.commit()
    from browser_support import CHROMIUM
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield env, tool, platform, browser
        browser.close()
    lms.stop()
    tool.stop()
    dispose_engines()


@pytest.mark.browser
def test_a_framed_launch_across_two_sites_in_chromium(two_sites):
    """Chromium keeps no Lax cookie of the tool in the LMS's cross-site iframe; the student
    still lands on the task, submits, sees the grade and takes the quiz inside the frame."""
    import json

    env, tool, platform, browser = two_sites
    page = browser.new_page()
    refused = []
    page.on("console", lambda m: refused.append(m.text) if "frame-ancestors" in m.text else None)
    custom = json.dumps({"attn_grader_assignment": "sdpa"})
    page.goto(f"{platform.url}/course?user=lms-ada&link=link-sdpa&lineitem=li-sdpa&custom={custom}")
    frame = page.frame_locator("#tool")
    frame.locator("#submit-form").wait_for()
    [inner] = [f for f in page.frames if "/tasks/sdpa" in f.url]
    assert inner.url.startswith(tool.url) and "lti_frame=" in inner.url
    inner.set_input_files("#upload", {"name": "mine.py", "mimeType": "text/x-python",
                                      "buffer": b"# SCORE=7\n"})
    inner.click("#submit-form button[type=submit]")
    frame.locator("#result").wait_for()
    assert grade_queued(env) == 1
    inner.evaluate("location.reload()")
    frame.get_by_text("7 / 10").first.wait_for()

    quiz_url = inner.url.split("/submissions")[0] + "/quiz/quiz?" + inner.url.split("?")[1]
    inner.goto(quiz_url)
    inner.click("form[action*='/start'] button[type=submit]")
    frame.locator("#submit-quiz").wait_for()
    page.once("dialog", lambda dialog: dialog.accept())  # "submit with questions unanswered?"
    inner.click("#submit-quiz button[type=submit]")
    inner.wait_for_url("**/quiz/attempts/**")
    assert refused == []  # the browser never blocked a framed page
    # Of the tool, only the frame session's binding, kept in the LMS site's partition (CHIPS)
    kept = page.context.cookies(tool.url)
    assert [c["name"][:len("attn_frame_")] for c in kept] == ["attn_frame_"], kept
    assert kept[0]["sameSite"] == "None" and kept[0]["secure"]
    # The frame's URL copied into another browser (a fresh context) is refused there.
    elsewhere = browser.new_context().new_page()
    elsewhere.goto(inner.url)
    assert "/sign-in" in elsewhere.url

    # An instructor launched in a new window (top level: cookies as usual) reads the LTI
    # settings page on a 390 px phone, at its address with a trailing slash, without
    # sideways scrolling (issue 28, N8).
    from browser_support import PHONE
    phone = browser.new_page(viewport=PHONE)
    phone.goto(f"{platform.url}/start?user=lms-prof&link=link-sdpa&custom={custom}")
    phone.wait_for_url("**/tasks/sdpa")
    assert "lti_frame=" not in phone.url
    phone.goto(f"{tool.url}/instructor/lti/")
    phone.locator("#registration-url").wait_for()
    assert phone.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")


# ---- login CSRF: the cookie-less state only inside a frame ----------------------------------

def test_a_captured_launch_posted_from_another_browser_is_refused(lti):
    """Someone starts a launch of their own, holds its POST and has another browser post it
    (an auto-submitting form on any page): without the state cookie, outside a frame, it
    must not sign that browser in (review 3, H6)."""
    env, tool, platform = lti
    custom = '{"attn_grader_assignment": "sdpa"}'
    # Captured in a frame (the login was framed), posted top-level elsewhere: refused.
    page = _frame_browser().get(f"{platform.url}/start", params={
        "user": "lms-ada", "link": "link-sdpa", "custom": custom})
    action, fields = _form(page.text)
    victim = requests.Session()
    posted = victim.post(action, data=fields, allow_redirects=False)
    assert posted.status_code == 400 and "did not start in this browser" in posted.text
    assert not victim.cookies  # not signed in
    # Captured top-level (the state cookie stayed with its browser), posted into a frame
    # elsewhere: the login was not framed, so the cookie-less path is closed too.
    page = requests.Session().get(f"{platform.url}/start", params={
        "user": "lms-ada", "link": "link-sdpa", "custom": custom})
    action, fields = _form(page.text)
    posted = _frame_browser().post(action, data=fields, allow_redirects=False)
    assert posted.status_code == 400 and "did not start in this browser" in posted.text
    # A framed launch posted by a page of another site (its Origin) is refused as well.
    page = _frame_browser().get(f"{platform.url}/start", params={
        "user": "lms-ada", "link": "link-sdpa", "custom": custom})
    action, fields = _form(page.text)
    posted = _frame_browser().post(action, data=fields, allow_redirects=False,
                                   headers={"Origin": "https://evil.example"})
    assert posted.status_code == 400 and "did not come from the LMS" in posted.text


# ---- sign-out inside a frame -----------------------------------------------------------------

def test_signing_out_inside_a_frame_then_following_a_link_shows_the_sign_in_page(lti):
    """Flask-Login's lazily translated "Please sign in" is flashed into the frame session
    after sign-out; it must be stored, not answer 500 (review 3, M5)."""
    env, tool, platform = lti
    browser = _frame_browser()
    response, _ = _framed_launch(browser, platform, "lms-ada", link="link-sdpa",
                                 custom='{"attn_grader_assignment": "sdpa"}')
    task_url = tool.url + response.headers["Location"]
    page = browser.get(task_url)
    sign_out = re.search(r'<form[^>]*action="([^"]*/sign-out[^"]*)"', page.text).group(1)
    out = browser.post(tool.url + sign_out.replace("&amp;", "&"),
                       data={"csrf_token": _csrf(page.text)}, allow_redirects=False)
    assert out.status_code == 302 and "/sign-in" in out.headers["Location"]
    again = browser.get(task_url, allow_redirects=False)
    assert again.status_code == 302 and "/sign-in" in again.headers["Location"]
    shown = browser.get(tool.url + again.headers["Location"]
                        if again.headers["Location"].startswith("/") else again.headers["Location"])
    assert shown.status_code == 200 and "Please sign in to see that page." in shown.text
