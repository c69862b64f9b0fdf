"""The LTI steps the shared Moodle harness does not have, in headless Chromium against the
real Moodle it sets up (``/work/shared/tools/moodle-lti``; run by ``moodle_lti_more.sh``).

Subcommands:
  dialog-deep-link   teacher: "Select content" in the activity form; the tool answers inside
                     Moodle's dialog (an iframe), an assignment is ticked there, the dialog
                     closes with the form filled, the activity is saved
  add-embedded       teacher: an External tool activity shown embedded in the course page
  embedded           student: opens the embedded activity; inside the iframe submits a file
                     and waits for the grade
  quiz               student: opens a quiz activity (new window), answers questions, submits
                     (accepting the "questions unanswered" confirmation), prints the score
  dynreg             admin: pastes the tool's dynamic-registration URL into Manage tools,
                     (chooses "register as a new tool" when Moodle asks), activates the tool

It reuses the harness's browser and login helpers (its ``drive.py``); Moodle on MOODLE
(default http://127.0.0.1:8800), the tool on TOOL (default http://localhost:5095).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

HARNESS = os.environ.get("MOODLE_HARNESS", "/work/shared/tools/moodle-lti")
sys.path.insert(0, HARNESS)
from drive import (MOODLE, TOOL, _open_launch, browser_ctx, moodle_login,  # noqa: E402
                   set_field, shot)
from playwright.sync_api import sync_playwright  # noqa: E402


def _tool_frame(page, path_part: str, timeout: float = 60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for frame in page.frames:
            if frame.url.startswith(TOOL) and path_part in frame.url:
                return frame
        page.wait_for_timeout(500)
    return None


def _report_csp_blocks(page, seen: list):
    page.on("console", lambda m: seen.append(m.text) if "frame-ancestors" in m.text
            or "Refused to frame" in m.text else None)


def _signed_in(p, user: str):
    """A browser with one page signed in to Moodle as ``user``, and the list that collects the
    console's framing refusals on it."""
    browser, ctx = browser_ctx(p)
    page = ctx.new_page()
    blocked: list = []
    _report_csp_blocks(page, blocked)
    moodle_login(page, user)
    return browser, page, blocked


def dialog_deep_link(args):
    with sync_playwright() as p:
        browser, page, blocked = _signed_in(p, "teacher1")
        page.goto(f"{MOODLE}/course/modedit.php?add=lti&course={args.course}&section=1&return=0")
        page.wait_for_load_state("networkidle")
        page.fill("#id_name", "placeholder")
        page.select_option("#id_typeid", str(args.typeid))
        page.wait_for_timeout(800)
        page.click("#id_selectcontent")
        picker = _tool_frame(page, "/lti/deep-link/")
        shot(page, "60-dialog-picker")
        if picker is None:
            print("the tool's picker never appeared in Moodle's dialog; frames:",
                  [f.url[:120] for f in page.frames], "blocked:", blocked)
            raise SystemExit(1)
        print("picker inside Moodle's dialog (framed):", picker.url.split("?")[0],
              "| frame token in URL:", "lti_frame=" in picker.url)
        picker.check(f"input[name=assignments][value={args.slug}]")
        picker.click("form.card button[type=submit]")
        # contentitem_return.php (inside the dialog) hands the result to the form and closes it
        page.wait_for_function("() => /attn_grader_assignment=/.test("
                               "(document.querySelector('[name=instructorcustomparameters]')||{}).value||'')",
                               timeout=60_000)
        shot(page, "61-dialog-closed-form-filled")
        print("form filled by the dialog: name =", page.input_value("#id_name"), "| custom =",
              page.input_value("[name=instructorcustomparameters]").strip())
        page.click("#id_submitbutton")  # "Save and display"
        page.wait_for_load_state("networkidle")
        cmid = re.search(r"[?&]id=(\d+)", page.url)
        shot(page, "62-dialog-activity-saved")
        print("created activity: cmid", cmid.group(1) if cmid else "?", "| url", page.url)
        print("frame-ancestors blocks seen:", blocked or "none")
        browser.close()


def add_embedded(args):
    with sync_playwright() as p:
        browser, page, _ = _signed_in(p, "teacher1")
        page.goto(f"{MOODLE}/course/modedit.php?add=lti&course={args.course}&section=1&return=0")
        page.wait_for_load_state("networkidle")
        page.fill("#id_name", args.name)
        page.select_option("#id_typeid", str(args.typeid))
        page.wait_for_timeout(800)
        set_field(page, "instructorcustomparameters", f"attn_grader_assignment={args.slug}")
        set_field(page, "instructorchoiceacceptgrades", True)
        set_field(page, "grade[modgrade_type]", "point")
        set_field(page, "grade[modgrade_point]", str(args.maxgrade))
        set_field(page, "launchcontainer", "2")  # Embed: the tool in an iframe of the page
        page.click("#id_submitbutton")
        page.wait_for_load_state("networkidle")
        cmid = re.search(r"[?&]id=(\d+)", page.url)
        print("embedded activity: cmid", cmid.group(1) if cmid else "?", "| url", page.url)
        browser.close()


def embedded(args):
    with sync_playwright() as p:
        browser, page, blocked = _signed_in(p, args.user)
        page.goto(f"{MOODLE}/mod/lti/view.php?id={args.cmid}")
        frame = _tool_frame(page, "/tasks/" if not args.quiz else "/quiz/")
        shot(page, "70-embedded-landed")
        if frame is None:
            print("the tool never appeared in the course page's iframe; frames:",
                  [f.url[:120] for f in page.frames], "blocked:", blocked)
            raise SystemExit(1)
        print("top-level page:", page.url, "| tool framed at", frame.url.split("?")[0],
              "| frame token in URL:", "lti_frame=" in frame.url)
        if args.submit:
            frame.set_input_files("#upload", args.submit)
            frame.click("#submit-form button[type=submit]")
            frame.locator('#result[data-status="done"], #result[data-status="failed"]').wait_for(
                timeout=args.wait * 1000)
            shot(page, "71-embedded-graded")
            text = frame.inner_text("main")
            score = re.search(r"(\d+(?:\.\d+)?)\s*/\s*100", text)
            print("graded inside the iframe:", score.group(0) if score else text[:300])
        print("tool cookies stored by the browser:", page.context.cookies(TOOL) or "none")
        print("frame-ancestors blocks seen:", blocked or "none")
        browser.close()


def quiz(args):
    with sync_playwright() as p:
        # no dialog handler: Playwright dismisses dialogs, as the harness's browser does, so a
        # dialog before the quiz's submission would stop it here (issue 28's N11 asks in the page)
        browser, page, _ = _signed_in(p, args.user)
        _open_launch(page, args.cmid, "65-quiz")
        start = page.locator("form[action*='/start'] button[type=submit]")
        if start.count():
            start.first.click()
            page.wait_for_load_state("networkidle")
        answered = 0
        for phrase in args.answer:
            form = page.locator("form.answer-form").filter(
                has=page.locator("label", has_text=phrase)).first
            if form.count():
                form.locator("label", has_text=phrase).first.click()
                form.locator("button[type=submit]").click()
                page.wait_for_load_state("networkidle")
                answered += 1
        print("answered", answered, "question(s) by their option text")
        page.click("#submit-quiz button[type=submit]")
        page.wait_for_url("**/quiz/attempts/**", timeout=60_000)
        shot(page, "66-quiz-submitted")
        score = re.search(r"(\d+(?:[.,]\d+)?)\s*/\s*27", page.inner_text("main"))
        print("attempt submitted:", page.url.split("?")[0], "| score", score.group(0) if score else "?")
        browser.close()


def dynreg(args):
    with sync_playwright() as p:
        browser, page, blocked = _signed_in(p, "admin")
        page.goto(f"{MOODLE}/mod/lti/toolconfigure.php")
        page.wait_for_load_state("networkidle")
        before = page.locator(".tool-card").count()
        page.fill("#tool-url", args.url)
        shot(page, "80-dynreg-pasted")
        page.click("#tool-create-button")
        deadline = time.time() + 60
        clicked_new = False
        while time.time() < deadline:
            frames = [f for f in page.frames if "startltiadvregistration.php" in f.url]
            new = frames[0].locator("button[data-href$='type=0']") if frames else None
            if new is not None and new.count() and not clicked_new:
                print("Moodle asks whether to update the tool already on this domain:"
                      " registering a new one")
                new.first.click()
                clicked_new = True
            if _tool_frame(page, "/lti/register/", timeout=0.1) is not None:
                break
            if page.locator("#external-registration-container.hidden").count() and clicked_new:
                break
            page.wait_for_timeout(500)
        page.wait_for_timeout(3000)
        shot(page, "81-dynreg-after")
        page.goto(f"{MOODLE}/mod/lti/toolconfigure.php")
        page.wait_for_load_state("networkidle")
        page.wait_for_timeout(1500)
        cards = page.locator(".tool-card")
        print("tool cards before", before, "after", cards.count())
        activate = page.locator(".tool-card a.activate")
        if activate.count():
            activate.last.click()
            page.wait_for_timeout(2000)
            print("activated the pending tool")
        shot(page, "82-dynreg-activated")
        print("tools:", [t.strip().replace("\n", " | ")[:120]
                         for t in page.locator(".tool-card").all_inner_texts()])
        print("frame-ancestors blocks seen:", blocked or "none")
        browser.close()


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("dialog-deep-link")
    a.add_argument("--course", type=int, required=True)
    a.add_argument("--typeid", type=int, required=True)
    a.add_argument("--slug", default="mha")
    a = sub.add_parser("add-embedded")
    a.add_argument("--course", type=int, required=True)
    a.add_argument("--typeid", type=int, required=True)
    a.add_argument("--slug", default="sdpa")
    a.add_argument("--name", default="SDPA embedded (attn-grader)")
    a.add_argument("--maxgrade", type=int, default=100)
    a = sub.add_parser("embedded")
    a.add_argument("--user", default="student2")
    a.add_argument("--cmid", type=int, required=True)
    a.add_argument("--submit")
    a.add_argument("--quiz", action="store_true")
    a.add_argument("--wait", type=int, default=240)
    a = sub.add_parser("quiz")
    a.add_argument("--user", default="student2")
    a.add_argument("--cmid", type=int, required=True)
    a.add_argument("--answer", nargs="*", default=[], help="option texts to pick")
    a = sub.add_parser("dynreg")
    a.add_argument("--url", required=True)
    args = ap.parse_args()
    {"dialog-deep-link": dialog_deep_link, "add-embedded": add_embedded, "embedded": embedded,
     "quiz": quiz, "dynreg": dynreg}[args.cmd.replace("_", "-")](args)


if __name__ == "__main__":
    main()
