"""A frame session is no bearer pass (review 3, M1): its URL works only in the browser that
launched it, only inside the LMS's page, and never for lasting credentials.

Two kinds of "browser", both ``requests`` sessions saying ``Sec-Fetch-Dest: iframe``:
- a CHIPS browser (Chromium): it keeps the tool's partitioned cookie in the LMS's frame
  (loopback counts as a secure origin, so the ``Secure`` cookie comes back over HTTP);
- a browser that keeps no cookie of the tool at all (Safari's third-party frames).
"""
from __future__ import annotations

import re
from http.cookiejar import DefaultCookiePolicy
from urllib.parse import urlparse

import requests

from pages_support import db_session, grade_queued
from test_lti import _csrf, lti  # noqa: F401 (the fixture)
from test_lti_frame import FRAME, _frame_browser, _framed_launch

POLL = {"Sec-Fetch-Dest": "empty", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
SDPA = dict(link="link-sdpa", lineitem="li-sdpa", custom='{"attn_grader_assignment": "sdpa"}')


class _ChipsBrowser(requests.Session):
    """Keeps only partitioned cookies, as Chromium does in a third-party frame, and sends them
    back over loopback HTTP as Chromium does (``requests`` sends no ``Secure`` cookie over
    HTTP, nor one of a redirect's hop: these tests follow no redirect with it)."""

    def __init__(self):
        super().__init__()
        self.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
        self.headers.update(FRAME)
        self.partitioned: dict[str, dict[str, str]] = {}  # host -> name -> value
        self.hooks["response"].append(self._keep)

    def _keep(self, response, **_):
        for header in response.raw.headers.getlist("Set-Cookie"):
            if "partitioned" in header.lower():
                name, value = header.split(";")[0].split("=", 1)
                self.partitioned.setdefault(urlparse(response.url).netloc, {})[name] = value

    def request(self, method, url, **kw):
        jar = self.partitioned.get(urlparse(url).netloc)
        if jar:
            kw["headers"] = {**(kw.get("headers") or {}),
                             "Cookie": "; ".join(f"{k}={v}" for k, v in jar.items())}
        return super().request(method, url, **kw)


def _chips_browser() -> requests.Session:
    return _ChipsBrowser()


def _tokens(html: str) -> set[str]:
    return set(re.findall(r"lti_frame=([A-Za-z0-9_.\-]+)", html))


def _absolute(tool, location: str) -> str:
    return tool.url + location if location.startswith("/") else location


def _signed_in_page(response) -> bool:
    return response.status_code == 200 and "/sign-out" in response.text


def test_a_copied_framed_url_is_refused_elsewhere_and_the_launching_browser_goes_on(lti):
    env, tool, platform = lti
    browser = _chips_browser()
    response, _ = _framed_launch(browser, platform, "lms-ada", **SDPA)
    assert response.status_code == 303
    task_url = _absolute(tool, response.headers["Location"])
    launch_token = task_url.split("lti_frame=")[1]
    page = browser.get(task_url)
    assert _signed_in_page(page) and 'id="submit-form"' in page.text
    fresh = _tokens(page.text)
    assert fresh and launch_token not in fresh  # the page's links carry a new token

    # Another browser, framed or not, with the launch's URL or the page's fresh token: refused.
    for other in (_frame_browser(), _chips_browser(), requests.Session()):
        copied = other.get(task_url, allow_redirects=False)
        assert copied.status_code == 302 and "/sign-in" in copied.headers["Location"]
    with_fresh = _frame_browser().get(f"{tool.url}/tasks/sdpa", allow_redirects=False,
                                      params={"lti_frame": sorted(fresh)[0]})
    assert with_fresh.status_code == 302

    # The launching browser: submit, follow, poll, go back to the first URL.
    submitted = browser.post(task_url, data={"csrf_token": _csrf(page.text), "code": "# SCORE=7\n"},
                             allow_redirects=False)
    assert submitted.status_code == 302
    assert grade_queued(env) == 1
    result = browser.get(_absolute(tool, submitted.headers["Location"]))
    assert _signed_in_page(result) and re.search(r"7\s*/\s*10", result.text)
    status_url = re.search(r'data-status-url="([^"]+)"', result.text).group(1).replace("&amp;", "&")
    polled = browser.get(tool.url + status_url, headers=POLL)
    assert polled.status_code == 200 and polled.json()["score"] == 7
    assert requests.get(tool.url + status_url, headers=POLL,
                        allow_redirects=False).status_code != 200  # not for another client
    assert _signed_in_page(browser.get(task_url))  # back to the launch's own URL


def test_without_a_cookie_the_token_works_only_framed_briefly_and_not_for_staff_pages(lti,
                                                                                    monkeypatch):
    from itsdangerous.timed import TimestampSigner
    from web.lti import frame

    env, tool, platform = lti
    browser = _frame_browser()
    response, _ = _framed_launch(browser, platform, "lms-ada", **SDPA)
    task_url = _absolute(tool, response.headers["Location"])
    page = browser.get(task_url)
    assert _signed_in_page(page)
    # Outside a frame (top-level, or a script without Fetch Metadata): refused.
    for headers in ({"Sec-Fetch-Dest": "document"}, {}):
        copied = requests.get(task_url, headers=headers, allow_redirects=False)
        assert copied.status_code == 302 and "/sign-in" in copied.headers["Location"]
    # The page's own polling (a same-origin fetch) goes on.
    submitted = browser.post(task_url, data={"csrf_token": _csrf(page.text), "code": "# SCORE=7\n"},
                             allow_redirects=False)
    result = browser.get(_absolute(tool, submitted.headers["Location"]))
    status_url = re.search(r'data-status-url="([^"]+)"', result.text).group(1).replace("&amp;", "&")
    assert requests.get(tool.url + status_url, headers=POLL).status_code == 200
    # A token signed longer ago than the unbound link lifetime is refused, even framed.
    with env.app.app_context():
        frame_id, _ = frame._serializer().loads(task_url.split("lti_frame=")[1])
        now = TimestampSigner.get_timestamp(None)
        monkeypatch.setattr(TimestampSigner, "get_timestamp",
                            lambda self: now - frame.UNBOUND_LINK_SECONDS - 60)
        old = frame.sign(frame_id)
        monkeypatch.undo()
    stale = browser.get(f"{tool.url}/tasks/sdpa", params={"lti_frame": old}, allow_redirects=False)
    assert stale.status_code == 302 and "/sign-in" in stale.headers["Location"]

    # An unbound instructor frame session reaches no staff page (only a content selection).
    staff = _frame_browser()
    response, _ = _framed_launch(staff, platform, "lms-prof", **SDPA)
    token = response.headers["Location"].split("lti_frame=")[1]
    for path in ("/instructor/", "/instructor/lti", "/instructor/submissions/1"):
        refused = staff.get(tool.url + path, params={"lti_frame": token})
        assert refused.status_code == 403 and 'id="lti-outside"' in refused.text


def test_a_bound_instructor_frame_mints_no_credentials_and_confirms_actions(lti):
    from web.lti.models import LtiContext

    env, tool, platform = lti
    staff = _chips_browser()
    response, _ = _framed_launch(staff, platform, "lms-prof", **SDPA)
    token = response.headers["Location"].split("lti_frame=")[1]
    assert staff.get(_absolute(tool, response.headers["Location"])).status_code == 200  # binds
    overview = staff.get(f"{tool.url}/instructor/", params={"lti_frame": token})
    assert _signed_in_page(overview)  # reading instructor pages in the frame is fine
    # Registration URLs, API tokens, invitations: never from a frame session.
    for method, path in (("get", "/instructor/lti"), ("get", "/account"),
                         ("post", "/account"), ("get", "/instructor/sign-up/"),
                         ("post", "/instructor/sign-up/invitations")):
        refused = getattr(staff, method)(tool.url + path, params={"lti_frame": token},
                                         data={"csrf_token": _csrf(overview.text)})
        assert refused.status_code == 403 and 'id="lti-outside"' in refused.text, path
        assert "/lti/register/" not in refused.text
    # An instructor's action asks once more, on a page of the tool, before it is done.
    action = f"{tool.url}/instructor/lti/contexts/1/roster"
    asked = staff.post(action, params={"lti_frame": token}, data={"csrf_token": _csrf(overview.text)})
    assert asked.status_code == 200 and 'id="lti-confirm"' in asked.text
    with db_session(env) as session:
        assert session.query(LtiContext).one().roster_synced_at is None
    form = asked.text[asked.text.index('id="lti-confirm"'):]
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
    confirm_action = re.search(r'<form method="post" action="([^"]+)"', asked.text[
        asked.text.index("<form method=\"post\" action=", asked.text.index("lti-confirm") - 200):]
    ).group(1).replace("&amp;", "&")
    done = staff.post(tool.url + confirm_action, data=fields, allow_redirects=False)
    assert done.status_code == 302
    with db_session(env) as session:
        assert session.query(LtiContext).one().roster_synced_at is not None
    # The confirmation works once.
    again = staff.post(tool.url + confirm_action, data=fields)
    assert 'id="lti-confirm"' in again.text
