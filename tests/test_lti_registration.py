"""LTI Advantage Dynamic Registration against the test platform (``lti_platform.py``): the
administrator pastes the tool's registration URL, the tool reads the platform's OpenID
configuration, registers itself, stores the platform, and launches then work."""
from __future__ import annotations

import re

import pytest
import requests

from lti_platform import LEARNER, LiveServer, Platform, platform_app
from pages_support import db_session, make_env


@pytest.fixture
def unregistered(tmp_path):
    from web.db import dispose_engines

    env = make_env(tmp_path, WTF_CSRF_ENABLED=True, LTI_ALLOW_HTTP=True)  # loopback LMS
    tool = LiveServer(env.app).start()
    platform = Platform(tool_url="http://tool.invalid")  # what it learns comes from registering
    lms = LiveServer(platform_app(platform))
    platform.url = lms.url
    lms.start()
    platform.users["lms-ada"] = {"name": "Ada L.", "email": "ada.lms@example.edu",
                                 "roles": [LEARNER]}
    yield env, tool, platform
    lms.stop()
    tool.stop()
    dispose_engines()


def _registration_url(env, tool, course=None) -> str:
    from web.lti.registration import registration_url
    return registration_url(tool.url, env.config["SECRET_KEY"], course)


def test_one_paste_registers_the_platform_and_its_launches_work(unregistered):
    from web.lti.models import LtiPlatform
    from test_lti import _form

    env, tool, platform = unregistered
    url = _registration_url(env, tool)
    params = {"openid_configuration": f"{platform.url}/.well-known/openid-configuration",
              "registration_token": platform.registration_token}
    page = requests.get(url, params=params)
    assert page.status_code == 200, page.text
    assert "org.imsglobal.lti.close" in page.text  # tells the LMS's window to close
    assert re.search(r"frame-ancestors [^;]*" + re.escape(platform.url), 
                     page.headers["Content-Security-Policy"])
    sent = platform.registered
    assert sent["initiate_login_uri"] == f"{tool.url}/lti/login"
    assert sent["redirect_uris"] == [f"{tool.url}/lti/launch"]
    assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in sent["scope"].split()
    with db_session(env) as session:
        [row] = session.query(LtiPlatform).all()
        assert (row.issuer, row.client_id, row.deployment_ids) == \
            (platform.url, "attn-grader-client", ["deployment-1"])
        assert row.auth_token_url == f"{platform.url}/token"

    # The LMS launches with what it learned; the tool accepts it.
    browser = requests.Session()
    start = browser.get(f"{platform.url}/start", params={
        "user": "lms-ada", "link": "l1", "custom": '{"attn_grader_assignment": "sdpa"}'})
    action, fields = _form(start.text)
    assert action == f"{tool.url}/lti/launch"
    launched = browser.post(action, data=fields, allow_redirects=False)
    assert launched.status_code == 303 and launched.headers["Location"].endswith("/tasks/sdpa")

    # The URL works once; the refusal is readable inside the LMS's registration panel (framable
    # by the LMS that opened it), not a broken frame.
    again = requests.get(url, params=params)
    assert again.status_code == 400 and "already used" in again.text
    assert re.search(r"frame-ancestors " + re.escape(platform.url) + "(;|$)",
                     again.headers["Content-Security-Policy"])
    assert "X-Frame-Options" not in again.headers


def test_registration_needs_a_genuine_url_and_a_consistent_platform(unregistered):
    from web.lti.models import LtiPlatform

    env, tool, platform = unregistered
    config = f"{platform.url}/.well-known/openid-configuration"
    forged = requests.get(f"{tool.url}/lti/register/not-a-token",
                          params={"openid_configuration": config})
    assert forged.status_code == 400 and "not a registration URL of this grader" in forged.text
    assert platform.registered == {}  # the platform was never even asked
    refused = requests.get(_registration_url(env, tool),
                           params={"openid_configuration": config, "registration_token": "wrong"})
    assert refused.status_code == 400 and "refused the registration" in refused.text
    elsewhere = requests.get(_registration_url(env, tool), params={
        "openid_configuration": config.replace("127.0.0.1", "localhost"),
        "registration_token": platform.registration_token})
    assert elsewhere.status_code == 400 and "not on the domain" in elsewhere.text
    with db_session(env) as session:
        assert session.query(LtiPlatform).count() == 0


def test_the_cli_makes_a_registration_url_scoped_to_a_course(unregistered):
    from click.testing import CliRunner

    from grader.cli import main

    env, tool, platform = unregistered
    cli_env = {f"ATTN_GRADER_{k}": str(env.config[k]) for k in
               ("DATABASE_URL", "INSTANCE_PATH", "SECRET_KEY")}
    runner = CliRunner()
    nowhere = runner.invoke(main, ["lti", "registration-url", "--base-url", tool.url,
                                   "--course", "nope"], env=cli_env)
    assert nowhere.exit_code == 1 and "no course 'nope'" in nowhere.output
    from web.models import Course
    with db_session(env) as session:
        slug = session.query(Course.slug).first()[0]
    made = runner.invoke(main, ["lti", "registration-url", "--base-url", tool.url,
                                "--course", slug], env=cli_env)
    assert made.exit_code == 0 and made.output.startswith(f"{tool.url}/lti/register/")
    done = requests.get(made.output.strip(), params={
        "openid_configuration": f"{platform.url}/.well-known/openid-configuration",
        "registration_token": platform.registration_token})
    assert done.status_code == 200, done.text
    from web.lti.models import LtiPlatform
    with db_session(env) as session:
        assert session.query(LtiPlatform).one().course.slug == slug
