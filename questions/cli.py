"""``attn-grader questions``: validate, list, show and export the question bank."""
from __future__ import annotations

import json
import sys

import click

from .schema import LANGS

BANK_HELP = "question directory (default: the bundled bank)"


@click.group()
def questions() -> None:
    """The self-check question bank: validate, list, show, export."""


@questions.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--no-code", is_flag=True, help="skip running code questions' solutions in the sandbox")
@click.option("--seeds", type=click.Path(file_okay=False, exists=True),
              help="the course's source texts for the copying rule (default: $ATTN_GRADER_SEEDS, "
                   "else ../shared/seeds beside the checkout)")
def validate(directory: str | None, no_code: bool, seeds: str | None) -> None:
    """Check every question file, variant and language; exit 1 on any problem."""
    from .check import validate_bank
    from .originality import default_seeds_dir, find_seeds
    folder = find_seeds(seeds)
    if folder is None:
        click.echo(f"note: no seed texts at {default_seeds_dir()} (nor --seeds / $ATTN_GRADER_SEEDS): "
                   "the rule against text copied from the course sources was skipped", err=True)
    bank, problems = validate_bank(directory, run_code=not no_code, seeds=folder or False)
    for line in problems:
        click.echo(line, err=True)
    variants = sum(len(q.variants()) for q in bank)
    if problems:
        click.echo(f"{len(problems)} problem(s) in {bank.path}", err=True)
        sys.exit(1)
    kinds: dict[str, int] = {}
    for q in bank:
        kinds[q.kind] = kinds.get(q.kind, 0) + 1
    click.echo(f"{len(bank)} questions, {variants} variants, languages {'/'.join(LANGS)}: all valid"
               + ("" if not no_code else " (code solutions not run)"))
    click.echo("  " + ", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())))


@questions.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="the figures as JSON")
def cues(directory: str | None, as_json: bool) -> None:
    """Answer cues per language: the longest option, then every test-wise strategy validate bounds."""
    from .cues import MAX_KEY_LONGEST, MAX_LONGEST_DEFICIT, MAX_LONGEST_GAIN, cue_report
    bank = _load(directory)
    report = cue_report(list(bank))
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    rows = [
        ("single: key strictly the longest option (share of views)", "single_key_longest", "%"),
        ("single: the same by chance", "single_chance", "%"),
        ("single: questions whose key is the longest in every view", "single_always_longest", "n"),
        (f"single: questions whose key is the longest in > {MAX_KEY_LONGEST:.0%} of views", "single_over_half", "n"),
        ("single: mean length ratio key / mean distractor", "single_mean_ratio", "x"),
        ("single: largest length ratio in any view", "single_max_ratio", "x"),
        ("multiple: the longest option is a correct one (share of views)", "multiple_longest_correct", "%"),
        ("multiple: the same by chance", "multiple_chance", "%"),
        ("multiple: questions whose longest option is correct in every view", "multiple_always_longest_correct", "n"),
    ]
    langs = list(report)
    click.echo(f"{'':<72}" + "".join(f"{lang:>8}" for lang in langs))
    for label, key, unit in rows:
        cells = [report[lang][key] for lang in langs]
        text = [f"{v:.1%}" if unit == "%" else f"{v:.2f}" if unit == "x" else str(v) for v in cells]
        click.echo(f"{label:<72}" + "".join(f"{t:>8}" for t in text))
    first = report[langs[0]]
    click.echo(f"{first['single_questions']} single- and {first['multiple_questions']} multiple-choice "
               f"questions; validate allows +{MAX_LONGEST_GAIN:.0%} / −{MAX_LONGEST_DEFICIT:.0%} around chance "
               "per language")
    from .strategies import MAX_GAIN, play
    click.echo(f"\nTest-wise strategies on single-choice questions: share of keys found (chance), per language; "
               f"validate allows chance +{MAX_GAIN:.0%}")
    results = play(list(bank))
    for name in dict.fromkeys(r.name for r in results):
        cells = {r.lang: f"{r.found:.1%} ({r.chance:.1%})" for r in results if r.name == name}
        click.echo(f"{name:<72}" + "".join(f"{cells.get(lang, ''):>16}" for lang in langs))


@questions.command("list")
@click.option("--bank", "directory", type=click.Path(file_okay=False), help=BANK_HELP)
@click.option("--json", "as_json", is_flag=True, help="one JSON object per question")
@click.option("--topic", help="only questions with this topic")
@click.option("--kind", help="only questions of this kind")
def list_(directory: str | None, as_json: bool, topic: str | None, kind: str | None) -> None:
    """List the questions (id, kind, topics, difficulty, languages)."""
    from .model import load_bank
    bank = _load(directory)
    rows = [q.summary() for q in bank if (not topic or topic in q.topics) and (not kind or q.kind == kind)]
    if as_json:
        click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for r in rows:
        click.echo(f"{r['id']:<34} {r['kind']:<9} {r['difficulty']:<6} {','.join(r['topics'])}")
    click.echo(f"{len(rows)} question(s)")


@questions.command()
@click.argument("question_id")
@click.option("--bank", "directory", type=click.Path(file_okay=False), help=BANK_HELP)
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("--student", default=None,
              help="a student's key (user:<id>): their own variant, which needs the server's "
                   "quiz secret; without it a public preview variant is shown")
@click.option("--answer", "show_answer", is_flag=True, help="also print the answer (instructors)")
@click.option("--grade", "student_answer", help="grade this answer (JSON for lists/maps, else text)")
def show(question_id, directory, lang, student, show_answer, student_answer) -> None:
    """Print one question as a student would see it (and optionally grade an answer)."""
    from .answers import AnswerFormatError, grade_answer, solution
    from .variants import render, variant_seed
    bank = _load(directory)
    try:
        q = bank.get(question_id)
    except KeyError as exc:
        raise click.ClickException(str(exc.args[0])) from None
    seed = variant_seed(student, q.id, _server_secret()) if student else \
        variant_seed(PREVIEW_KEY, q.id)
    if not student:
        click.echo("(a public preview variant, not any student's; --student user:<id> on the "
                   "server shows theirs)", err=True)
    view = render(q, seed, lang)
    click.echo(f"# {view['title']}  [{q.kind}, {q.difficulty}, {format(q.points, 'g')} pt]\n")
    click.echo(view["prompt"] + "\n")
    for key in ("options", "items", "left", "right"):
        for entry in view.get(key, []):
            click.echo(f"  {entry['id']}  {entry['text']}")
    if "template" in view:
        click.echo(view["template"])
    if show_answer:
        click.echo("\nanswer: " + json.dumps(solution(q, seed, lang), ensure_ascii=False))
    if student_answer is not None:
        try:
            answer = json.loads(student_answer) if student_answer[:1] in "[{" else student_answer
            result = grade_answer(q, seed, answer, lang)
        except (AnswerFormatError, ValueError) as exc:
            raise click.ClickException(f"cannot grade that answer: {exc}") from None
        from grader.i18n import render as in_language
        # the feedback in --lang (made in English; ``feedback_i18n`` is what a server stores)
        shown = {**result.to_dict(), "feedback": in_language(result.feedback, lang)}
        click.echo("\n" + json.dumps(shown, ensure_ascii=False, indent=2))


@questions.command()
@click.option("--format", "fmt", type=click.Choice(["moodle-xml", "gift", "qti", "json"]), required=True)
@click.option("--lang", type=click.Choice(LANGS), default="en", show_default=True)
@click.option("--variants", type=click.IntRange(1, 50), default=1, show_default=True,
              help="concrete variants per parameterised question (named <id>-v1, -v2...)")
@click.option("--bank", "directory", type=click.Path(file_okay=False), help=BANK_HELP)
@click.option("-o", "--output", type=click.Path(), help="file to write (QTI: NAME.zip or a directory)")
@click.option("--topic", help="only questions with this topic")
@click.option("--kind", help="only questions of this kind")
@click.option("--moodle-ordering-as-matching", "legacy_ordering", is_flag=True,
              help="Moodle XML for a Moodle before 4.4 without the ordering question type: ordering "
                   "questions as matching to positions (credit by absolute position)")
def export(fmt, lang, variants, directory, output, topic, kind, legacy_ordering) -> None:
    """Export the bank for an LMS: Moodle XML, GIFT, QTI 2.1 or JSON."""
    from .export import export as run_export
    from .model import Bank
    bank = _load(directory)
    if topic or kind:
        chosen = {q.id: q for q in bank if (not topic or topic in q.topics) and (not kind or q.kind == kind)}
        if not chosen:
            raise click.ClickException(f"no question matches --topic {topic!r} --kind {kind!r}")
        bank = Bank(chosen, bank.errors, bank.path)
    try:
        result = run_export(bank, fmt, lang, variants, output, legacy_ordering=legacy_ordering)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if fmt == "qti":
        click.echo(f"wrote {result}", err=True)
    elif output:
        with open(output, "w", encoding="utf-8") as f:
            f.write(result)
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(result, nl=False)


PREVIEW_KEY = "preview"


def _server_secret() -> bytes:
    """The service's quiz secret, read as the server reads it; a clear error where there is none.

    A student's variant is an HMAC under this secret, so on a machine without it (a student's
    laptop) no student's numbers or answers can be computed.
    """
    from web.config import server_quiz_secret

    secret, where = server_quiz_secret()
    if secret is None:
        raise click.ClickException(
            "no quiz secret is set here, and a student's variant depends on it. On the server, "
            f"set {where}; or leave out --student for a public preview variant.")
    return secret


def _load(directory):
    from .model import load_bank
    bank = load_bank(directory)
    if bank.errors:
        for line in bank.errors:
            click.echo(line, err=True)
        if not len(bank):
            raise click.ClickException("no valid questions to work with")
        click.echo(f"warning: {len(bank.errors)} problem(s); run `attn-grader questions validate`", err=True)
    return bank
