"""WCAG 2.1 AA in headless Chromium (review 3): an axe-core audit of every page in English,
Russian and Chinese (signed out, a student with a graded submission and a quiz of every
question kind, an instructor), keyboard-only journeys with a visible focus at every step,
nothing lost at 200 % zoom, and no motion when the reader asks for less.

axe-core is vendored (``tests/data/axe``, MPL-2.0, its notice kept): a fresh clone runs this
offline. One server, one browser context per person, shared by the tests of this module: each
page is audited in the three languages by switching the account's language, not by signing in
again. Skips with the reason when Chromium or Playwright is missing (``browser_support``).
"""
from __future__ import annotations

import re

import pytest

from browser_support import ROOT, server, shot, sign_in, submission_url, wait_graded  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AXE = ROOT / "tests" / "data" / "axe" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
LANGS = ("en", "ru", "zh")
PASSWORD = "correct horse"  # seed_people's
STUDENT, INSTRUCTOR = "ada@example.org", "prof@example.org"
TASKS = ("sdpa", "mha", "causal", "tiled", "decoder")
CORPUS = ROOT / "grader" / "tasks" / "sdpa" / "corpus"
WRONG_FILE, CORRECT_FILE = CORPUS / "buggy" / "scale_constant_64.py", CORPUS / "correct" / "einsum.py"
# questions of every kind, added where the course's quiz lacks them so that every kind's inputs and
# review are audited: a grid matrix, a single entry, a shape, a big-O, code lines to order, several
# right options (the chapter quiz now has some of them; a question twice in a quiz is not allowed)
MORE_KINDS = ["hand-attention-output", "hand-causal-weight", "split-heads-shape",
              "self-attention-cost-big-o", "attention-code-lines", "multi-head-facts"]


SHOWN = {"/tasks/sdpa", "/quiz/quiz", "/instructor/assignments/quiz/settings", "/instructor/grading",
         "/instructor/assignments/sdpa"}


def audit(page) -> list[str]:
    """axe-core's WCAG 2.1 A and AA violations on the page, one readable line each."""
    if not page.evaluate("() => !!window.axe"):
        page.add_script_tag(path=str(AXE))
    result = page.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, "
                           "resultTypes: ['violations']})", AXE_TAGS)
    return [f"{v['id']} ({v['impact']}): {len(v['nodes'])}× e.g. {v['nodes'][0]['target']} — "
            f"{v['nodes'][0]['failureSummary'].splitlines()[-1].strip()}" for v in result["violations"]]


def _context(server, **options):
    context = server["browser"].new_context(viewport={"width": 1366, "height": 900}, bypass_csp=True,
                                            **options)
    context.set_default_timeout(30_000)
    return context


def _language(page, base: str, lang: str) -> None:
    page.goto(base + "/account")
    page.wait_for_load_state()
    if page.locator("html").get_attribute("lang") != lang:
        page.select_option("#lang", lang)
        page.wait_for_selector(f"html[lang={lang}]")


@pytest.fixture(scope="module")
def site(server):
    """The people's browser contexts and the pages to audit: a student with a graded wrong
    submission and a correct one, a submitted quiz attempt and an open one (every kind)."""
    from sqlalchemy.orm import Session
    from web.models import Assignment

    base = server["base"]
    with Session(server["engine"]) as session:
        quiz = session.query(Assignment).filter_by(slug="quiz").one()
        quiz.question_ids = list(quiz.question_ids) + [qid for qid in MORE_KINDS
                                                       if qid not in quiz.question_ids]
        session.commit()
    student = _context(server).new_page()
    sign_in(student, base, STUDENT, PASSWORD)
    urls = {}
    for name, path in (("correct", CORRECT_FILE), ("wrong", WRONG_FILE)):
        student.goto(base + "/tasks/sdpa")
        student.wait_for_selector(".CodeMirror")
        student.evaluate("src => document.querySelector('.CodeMirror').CodeMirror.setValue(src)", path.read_text())
        student.click("#submit-form button[type=submit]")
        urls[name] = submission_url(student)
    wait_graded(student)
    student.goto(urls["correct"])
    wait_graded(student)
    student.goto(base + "/quiz/quiz")
    student.click("form[action$='/start'] button[type=submit]")
    box = student.locator("#q-head-dimension")
    box.locator("input[type=text]").fill("7")
    with student.expect_navigation():
        box.locator("button[type=submit]").click()
    box = student.locator("#q-soft-lookup")
    box.locator("input[type=radio]").first.check()
    with student.expect_navigation():
        box.locator("button[type=submit]").click()
    student.locator("#submit-quiz button[type=submit]").click()
    student.wait_for_url("**/quiz/attempts/*")
    urls["attempt"] = student.url
    student.goto(base + "/quiz/quiz")
    student.click("form[action$='/start'] button[type=submit]")  # an open attempt: every kind's inputs
    student.wait_for_selector("#questions")

    instructor = _context(server).new_page()
    sign_in(instructor, base, INSTRUCTOR, PASSWORD)
    instructor.goto(base + "/instructor/assignments/sdpa/similarity/")
    instructor.click("main form button[type=submit]")
    instructor.wait_for_selector("#similar-pairs, #no-pairs", timeout=60_000)
    pairs = instructor.locator("#similar-pairs a[href*='/pairs/']")
    pair = [pairs.first.get_attribute("href")] if pairs.count() else []
    instructor.goto(base + "/instructor/")
    person = instructor.locator("#score-matrix a[href*='/instructor/students/']").first.get_attribute("href")
    sid = urls["wrong"].rsplit("/", 1)[1]
    pages = {
        "signed out": ["/sign-in", "/sign-up", "/forgot-password"],
        "student": ["/", *(f"/tasks/{slug}" for slug in TASKS), urls["wrong"].removeprefix(base),
                    urls["correct"].removeprefix(base), f"/submissions/{sid}/compare", "/quiz/quiz",
                    urls["attempt"].removeprefix(base), "/account"],
        "instructor": ["/instructor/", "/instructor/assignments/sdpa", "/instructor/assignments/quiz",
                       "/instructor/assignments/sdpa/settings", "/instructor/assignments/quiz/settings",
                       f"/instructor/submissions/{sid}", "/instructor/grading", "/instructor/questions",
                       *(f"/instructor/questions/{qid}" for qid in MORE_KINDS[:3]), "/instructor/jobs",
                       "/instructor/sign-up/", "/instructor/assignments/sdpa/similarity/", *pair, person,
                       "/instructor/lti", "/account"],
    }
    yield {"base": base, "student": student, "instructor": instructor, "urls": urls, "pages": pages}
    student.context.close()
    instructor.context.close()


@pytest.mark.parametrize("lang", LANGS)
def test_every_page_passes_an_axe_audit(server, site, lang):
    base, found = site["base"], {}
    visitor = _context(server).new_page()
    visitor.goto(f"{base}/language/{lang}?next=/sign-in")
    for page in (site["student"], site["instructor"]):
        _language(page, base, lang)
    for who, paths in site["pages"].items():
        page = visitor if who == "signed out" else site[who]
        for path in paths:
            page.goto(base + path)
            assert page.locator("html").get_attribute("lang") == lang, (who, path)
            problems = audit(page)
            if problems:
                found[f"{lang} {who} {path}"] = problems
            if path in SHOWN or path == site["urls"]["wrong"].removeprefix(base):  # pages review 3 changed
                shot(page, f"a11y-{lang}-{who}-" + re.sub(r"\W+", "-", path).strip("-"), full_page=False)
    visitor.context.close()
    assert not found, "\n".join(f"{where}:\n  " + "\n  ".join(p) for where, p in found.items())


# Where the keyboard is, and whether it shows: an outline or a shadow on the focused element (on
# CodeMirror's wrapper for its hidden textarea). Returns null when nothing is focused.
FOCUSED = """sel => { const e = document.activeElement;
  if (!e || e === document.body || e === document.documentElement) return null;
  const shown = e.closest('.CodeMirror') || e;
  const s = getComputedStyle(shown);
  const visible = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || (s.boxShadow && s.boxShadow !== 'none');
  return {matches: e.matches(sel), visible: !!visible, editor: !!e.closest('.CodeMirror'),
          what: e.outerHTML.slice(0, 90)}; }"""


def tab_to(page, selector: str, limit: int = 150) -> None:
    """Tab (as a keyboard user does) until ``selector`` has the focus; every element passed on
    the way must show that it has it. In a code editor, Esc first: Tab indents there."""
    unseen = []
    page.wait_for_load_state()
    for _ in range(limit):
        here = page.evaluate(FOCUSED, selector)
        if here and here["editor"]:
            page.keyboard.press("Escape")
        page.keyboard.press("Tab")
        here = page.evaluate(FOCUSED, selector)
        if here is None:
            continue
        if not here["visible"]:
            unseen.append(here["what"])
        if here["matches"]:
            assert not unseen, f"focus not visible on {unseen}"
            return
    raise AssertionError(f"{selector} not reached by Tab in {limit} presses on {page.url}")


def walk(page, steps: int = 60) -> None:
    """Tab through the start of a page: every stop shows the focus."""
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    unseen = []
    for _ in range(steps):
        here = page.evaluate(FOCUSED, "*")
        if here and here["editor"]:
            page.keyboard.press("Escape")
        page.keyboard.press("Tab")
        here = page.evaluate(FOCUSED, "*")
        if here and not here["visible"]:
            unseen.append(here["what"])
    assert not unseen, f"focus not visible on {page.url}: {unseen[:5]}"


def _keyboard_sign_in(page, base: str, email: str) -> None:
    page.goto(base + "/sign-in")
    tab_to(page, "#email")
    page.keyboard.type(email)
    tab_to(page, "#password")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector("nav form[action$='/sign-out']")


def test_a_student_works_by_keyboard_alone(server, site):
    """Sign in, write code in the editor and submit it, read the result, take the quiz and
    submit it: Tab, Esc, Enter and typing only, the focus visible at every stop."""
    base = site["base"]
    page = _context(server).new_page()
    _keyboard_sign_in(page, base, "bob@example.org")
    tab_to(page, "a[href$='/tasks/sdpa']")
    page.keyboard.press("Enter")
    page.wait_for_selector(".CodeMirror")
    tab_to(page, ".CodeMirror textarea")
    # the editor's field has the label the page shows, and says how to leave it
    name = page.evaluate("() => { const t = document.activeElement; return [t.getAttribute('aria-labelledby'),"
                         " t.getAttribute('aria-describedby')]; }")
    assert all(name) and page.locator(f"#{name[1]}").is_visible()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(CORRECT_FILE.read_text())  # typed (pasted): CodeMirror takes it as input
    page.keyboard.press("Tab")  # in the editor Tab indents ...
    assert page.evaluate(FOCUSED, "*")["editor"]
    tab_to(page, "#submit-form button[type=submit]")  # ... and Esc, Tab moves on
    page.keyboard.press("Enter")
    submission_url(page)
    wait_graded(page)
    score = page.locator("#result .score strong").inner_text()
    assert score.split("/")[0].strip() == score.split("/")[1].strip(), score
    walk(page, 25)  # the result page's own stops
    shot(page, "a11y-keyboard-result", full_page=False)

    tab_to(page, "nav a[href='/']", limit=300)
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector(".cards .assignment")
    tab_to(page, "a[href$='/quiz/quiz']")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    tab_to(page, "form[action$='/start'] button[type=submit]")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_selector("#questions")
    tab_to(page, "#q-head-dimension input[type=text]")
    page.keyboard.type("7")
    with page.expect_navigation():
        page.keyboard.press("Enter")  # sends this question's form
    page.wait_for_selector("#q-head-dimension .feedback")
    shot(page, "a11y-keyboard-quiz", full_page=False)
    tab_to(page, "a[href='#submit-quiz']")  # the page's own link down to the submit button
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED, "#submit-quiz button[type=submit]")["matches"]
    page.keyboard.press("Enter")
    page.wait_for_url("**/quiz/attempts/*")
    walk(page, 30)
    page.context.close()


def test_an_instructor_works_by_keyboard_alone(server, site):
    """The score matrix (sorted by a column header), an assignment's statistics, the quiz's
    settings saved with a new deadline, the grading queue and a submission: by keyboard."""
    base = site["base"]
    page = _context(server).new_page()
    _keyboard_sign_in(page, base, INSTRUCTOR)
    page.goto(base + "/instructor/")
    tab_to(page, "#score-matrix th a[href*='sort=name']")
    page.keyboard.press("Enter")
    page.wait_for_url("**sort=name**")
    assert page.locator("#score-matrix th[aria-sort]").count() == 1
    tab_to(page, "#score-matrix a[href$='/instructor/assignments/sdpa']")
    page.keyboard.press("Enter")
    page.wait_for_url("**/instructor/assignments/sdpa")
    walk(page, 40)
    page.goto(base + "/instructor/assignments/quiz/settings")
    order = page.locator("input[name=question_ids]:checked").evaluate_all("l => l.map(e => e.value)")
    tab_to(page, "#late_penalty")
    page.keyboard.press("Control+A")
    page.keyboard.type("0.1")
    page.keyboard.press("Enter")  # a text field's Enter sends its form (the save button is 200 stops on)
    page.wait_for_selector(".flash-success")
    assert page.locator("input[name=question_ids]:checked").evaluate_all("l => l.map(e => e.value)") == order
    for path in ("/instructor/grading", f"/instructor/submissions/{site['urls']['wrong'].rsplit('/', 1)[1]}",
                 "/instructor/questions"):
        page.goto(base + path)
        walk(page, 40)
    page.context.close()


# Nothing lost at 200 % zoom: a 1280 px window zoomed to 200 % lays pages out in 640 CSS px.
ZOOMED = {"width": 640, "height": 450}
CLIPPED = """() => { const W = document.documentElement.clientWidth, bad = [];
  for (const e of document.querySelectorAll('a, button, input:not([type=hidden]), select, textarea, summary')) {
    const r = e.getBoundingClientRect();
    if (!r.width || !r.height || getComputedStyle(e).visibility === 'hidden') continue;
    let p = e.parentElement, scrolls = false;  // inside a scrolling box (a data table) is allowed
    for (; p && !scrolls; p = p.parentElement) scrolls = ['auto', 'scroll'].includes(getComputedStyle(p).overflowX) && p !== document.body;
    if (!scrolls && (r.right > W + 1 || r.left < -1)) bad.push(e.outerHTML.slice(0, 80));
  }
  return {wide: document.documentElement.scrollWidth > W, bad}; }"""


def test_nothing_is_lost_at_200_percent_zoom(server, site):
    base, lost = site["base"], {}
    for who in ("student", "instructor"):
        zoomed = server["browser"].new_context(viewport=ZOOMED, storage_state=site[who].context.storage_state())
        page = zoomed.new_page()
        _language(page, base, "en")
        for path in site["pages"][who]:
            page.goto(base + path)
            found = page.evaluate(CLIPPED)
            if found["wide"] or found["bad"]:
                lost[path] = found
                shot(page, "a11y-zoom-" + re.sub(r"\W+", "-", path)[-50:])
        zoomed.close()
    assert not lost, lost


REDUCED = """() => [...document.querySelectorAll('*')].filter(e => { const s = getComputedStyle(e);
  return s.animationName !== 'none' || s.transitionDuration.split(',').some(d => parseFloat(d) > 0); })
  .map(e => e.outerHTML.slice(0, 80))"""


def test_a_reader_who_asks_for_less_motion_gets_none(server, site):
    """With prefers-reduced-motion, no element animates or transitions, the grading steps'
    pulse included (shown here by adding the element it is on), and the editor's cursor does
    not blink; without it, the pulse is there (the check can fail)."""
    base = site["base"]
    storage = site["student"].context.storage_state()
    steps = "() => { const o = document.createElement('ol'); o.className = 'steps'; " \
            "o.innerHTML = '<li class=\"current\">x</li>'; document.querySelector('main').append(o); }"
    for motion, expect_none in (("reduce", True), ("no-preference", False)):
        context = server["browser"].new_context(reduced_motion=motion, storage_state=storage)
        page = context.new_page()
        page.goto(base + "/tasks/sdpa")
        page.wait_for_selector(".CodeMirror")
        page.evaluate(steps)
        moving = page.evaluate(REDUCED)
        if expect_none:
            assert moving == [], moving
            blink = page.evaluate("() => document.querySelector('.CodeMirror').CodeMirror.getOption('cursorBlinkRate')")
            assert blink == 0
            for path in site["pages"]["student"]:
                page.goto(base + path)
                assert page.evaluate(REDUCED) == [], path
        else:
            assert any("steps" in m or "current" in m for m in moving), moving
        context.close()
