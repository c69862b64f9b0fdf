"""The browser test's harness: one server with two real grading workers, one headless
Chromium, and the helpers the journeys share (screenshots, the page's language, translated
labels). ``server`` is a module fixture: import it into the test module."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from functools import lru_cache
from pathlib import Path

import pytest

from service_support import env_for, free_port, make_config, migrate, seed_people, spawn_worker

ROOT = Path(__file__).resolve().parent.parent
SHOTS = Path(os.environ.get("BROWSER_SHOTS") or ROOT / "artifacts" / "screenshots")
CHROMIUM = os.environ.get("ATTN_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage"]
LAPTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
GRADE_TIMEOUT_MS = 120_000


@lru_cache(maxsize=None)
def _catalogue(lang: str):
    from babel.support import Translations
    return Translations.load(str(ROOT / "web" / "translations"), [lang])


def translated(lang: str, msgid: str) -> str | None:
    """The catalogue's translation of ``msgid``, or None where it has none yet (English,
    or a label the translators have not reached): only a real translation is asserted."""
    if lang == "en":
        return None
    text = _catalogue(lang).gettext(msgid)
    return text if text != msgid else None


def _playwright():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"Chromium not found at {CHROMIUM} (install Debian's `chromium`; "
                    "scripts/system-deps.sh does it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[test]')")
    return sync_playwright


@pytest.fixture(scope="module")
def server(tmp_path_factory, request):
    sync_playwright = _playwright()
    tmp = tmp_path_factory.mktemp("browser")
    config = make_config(tmp, PAGES=True, GRADE_FUNCTION="grader.grading:grade_source", SANDBOX="none",
                         LEASE_SECONDS=30.0, POLL_SECONDS=0.1)
    migrate(config["DATABASE_URL"])
    from web.db import get_engine
    engine = get_engine(config["DATABASE_URL"])
    seed_people(engine)
    port = free_port()
    launcher = ("import waitress, web; "
                f"waitress.serve(web.create_app(), host='127.0.0.1', port={port}, threads=6, _quiet=True)")
    web_proc = subprocess.Popen([sys.executable, "-c", launcher], cwd=ROOT,
                                env=env_for(config, ATTN_GRADER_PAGES="true"))
    workers = [spawn_worker(config, f"browser-w{i}") for i in range(2)]
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or web_proc.poll() is not None:
                    raise RuntimeError("the web server did not start")
                time.sleep(0.2)
        SHOTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield {"base": base, "browser": browser, "engine": engine, "config": config}
            browser.close()
    finally:
        for proc in [web_proc, *workers]:
            proc.terminate()
        for proc in [web_proc, *workers]:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled():  # shown also when the run passes
            print(f"\nbrowser screenshots: {SHOTS}")


def new_page(server, storage_state=None):
    context = server["browser"].new_context(viewport=LAPTOP, accept_downloads=True,
                                            storage_state=storage_state)
    page = context.new_page()
    page.set_default_timeout(30_000)
    return page


def shot(page, name: str, full_page: bool = True) -> None:
    if full_page:  # pictures below the fold load when scrolled to: load them all for the shot
        page.evaluate("document.querySelectorAll('img[loading=lazy]').forEach(i => { i.loading = 'eager'; })")
        page.wait_for_function("() => [...document.images].every(i => i.complete)")
    page.wait_for_load_state("networkidle")  # the charts are images loaded after the page
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def phone_shot(server, storage_state, url: str, name: str) -> None:
    context = server["browser"].new_context(viewport=PHONE, storage_state=storage_state,
                                            is_mobile=True, device_scale_factor=1)
    page = context.new_page()
    page.goto(url)
    shot(page, name)
    # nothing sticks out sideways on a phone
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], url
    context.close()


def expect_lang(page, lang: str) -> None:
    assert page.locator("html").get_attribute("lang") == lang, page.url


def expect_label(page, lang: str, selector: str, msgid: str) -> None:
    """Where the catalogue translates ``msgid``, the element shows the translation."""
    text = translated(lang, msgid)
    if text is not None:
        assert text in page.locator(selector).first.inner_text(), (lang, msgid, selector)


def wait_graded(page) -> None:
    """The result page reloads itself when grading ends; nobody presses reload here."""
    page.wait_for_selector("h1 .badge-graded, h1 .badge-done", timeout=GRADE_TIMEOUT_MS)


def submission_url(page) -> str:
    page.wait_for_url(re.compile(r".*/submissions/\d+$"))
    return page.url


def sign_in(page, base: str, address: str, password: str) -> None:
    page.goto(base + "/sign-in")
    page.fill("#email", address)
    page.fill("#password", password)
    page.click("main form button[type=submit]")
    page.wait_for_selector("nav form[action$='/sign-out']")
