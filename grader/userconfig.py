"""``attn-grader config``: the student's remembered settings (server URL, API token), and
``config settings``, the table of every ``ATTN_GRADER_*`` variable (``grader/settings.py``).

One small INI file per user, where click puts an application's settings
(``~/.config/attn-grader/config.ini`` on Linux; ``ATTN_GRADER_CONFIG`` names another file).
It holds an API token, so it is written readable by its owner only.
"""
from __future__ import annotations

import configparser
import os
from pathlib import Path
from urllib.parse import urlparse

import click

from . import settings
from .i18n import N_

SECTION = "attn-grader"
# key -> what it is (the environment variable that overrides it is ATTN_GRADER_<KEY>)
KEYS = {
    "server": N_("URL of the grading service, e.g. https://grader.example.edu"),
    "token": N_("your API token (from the account page of the service)"),
    "lang": N_("language of check's and submit's output: en, ru or zh"),
}


def config_path() -> Path:
    explicit = settings.value("CONFIG")
    return Path(explicit) if explicit else Path(click.get_app_dir("attn-grader")) / "config.ini"


def _read() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    path = config_path()
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise click.ClickException(f"{path} is not a valid settings file ({exc}); "
                                   "fix or delete it") from None
    if not parser.has_section(SECTION):
        parser.add_section(SECTION)
    return parser


def stored(key: str) -> str | None:
    """The value remembered for ``key`` (None if unset)."""
    return _read().get(SECTION, key, fallback=None) or None


def current(key: str) -> tuple[str | None, str]:
    """The value ``submit`` uses for ``key`` where no option gives one, and where it comes from:
    the environment's ``ATTN_GRADER_<KEY>`` first, else the settings file."""
    from_env = settings.value(key.upper())
    return (from_env, settings.setting(key.upper()).variable) if from_env else (stored(key), "file")


def _write(parser: configparser.ConfigParser) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created with 0600 before anything is written: the token is never readable by others.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        parser.write(f)
    os.chmod(path, 0o600)
    return path


def _translator():
    from .i18n import gettext_for
    return gettext_for(language())


def language(explicit: str | None = None) -> str:
    """The CLI's language: --lang, else ATTN_GRADER_LANG or `config set lang`, else LANG/LC_ALL, else en."""
    from .i18n import language_from_environment, normalise

    chosen = explicit or current("lang")[0]
    return normalise(chosen) or language_from_environment() or "en"


def normalise_lang(value: str) -> str:
    from .i18n import LANGUAGES, normalise

    lang = normalise(value)
    if lang is None:
        raise click.BadParameter(f"{value!r} is not one of {', '.join(LANGUAGES)}", param_hint="VALUE")
    return lang


def normalise_server(url: str) -> str:
    url = url.strip().rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise click.BadParameter(f"{url!r} is not a web address; give one like "
                                 "https://grader.example.edu", param_hint="URL")
    return url


NORMALISE = {"server": normalise_server, "lang": normalise_lang}  # a key not listed: stripped


@click.group("config")
def config():
    """Remember settings for `submit` and `check`: the server's URL, your API token, the language.

    \b
    attn-grader config set server https://grader.example.edu
    attn-grader config set token   (asks for it; get one on the account page)
    attn-grader config set lang ru (en, ru or zh; else LANG/LC_ALL decides)
    attn-grader config show

    The environment variables ATTN_GRADER_SERVER, ATTN_GRADER_TOKEN and ATTN_GRADER_LANG, and
    the --server, --token and --lang options, take precedence over what is remembered here.
    `attn-grader config settings` lists every ATTN_GRADER_* variable (the service's too) with
    its default.
    """


@config.command("set")
@click.argument("key", type=click.Choice(sorted(KEYS)))
@click.argument("value", required=False)
def config_set(key, value):
    """Remember VALUE for KEY (server, token or lang)."""
    if value is None:
        if key != "token":
            raise click.UsageError(f"give the value: attn-grader config set {key} VALUE")
        value = click.prompt("API token (from the account page)", hide_input=True)
    value = NORMALISE.get(key, str.strip)(value)
    if not value:
        raise click.BadParameter("the value is empty", param_hint="VALUE")
    parser = _read()
    parser.set(SECTION, key, value)
    path = _write(parser)
    _ = _translator()  # after the write: `config set lang ru` already answers in Russian
    click.echo(_("{key} remembered in {path}").format(key=key, path=path) if key == "token" else
               _("{key} remembered in {path}: {value}").format(key=key, path=path, value=value))


@config.command("unset")
@click.argument("key", type=click.Choice(sorted(KEYS)))
def config_unset(key):
    """Forget KEY."""
    _ = _translator()
    parser = _read()
    removed = parser.remove_option(SECTION, key)
    path = _write(parser)
    click.echo(_("{key} forgotten ({path})").format(key=key, path=path) if removed else
               _("{key} was not set").format(key=key))


@config.command("show")
def config_show():
    """Show the settings `submit` will use and where each comes from."""
    _ = _translator()
    click.echo(_("settings file: {path}").format(path=config_path()))
    for key, meaning in KEYS.items():
        value, source = current(key)
        source = _("file") if source == "file" else source
        if value is None:
            click.echo(_("{key}: not set ({meaning})").format(key=key, meaning=_(meaning)))
            continue
        shown = value if key != "token" else value[:4] + "…" + _(" ({count} characters)").format(count=len(value))
        click.echo(_("{key}: {value}  [from {source}]").format(key=key, value=shown, source=source))


@config.command("settings")
@click.option("--markdown", is_flag=True, help="The docs' table (Markdown), as docs/operators/configuration.md must have it.")
def config_settings(markdown):
    """Every ATTN_GRADER_* environment variable: default and meaning, by group."""
    if markdown:
        click.echo(settings.markdown_table())
        return
    for key, title in settings.GROUPS.items():
        click.echo(f"\n{key}: {title.replace('`', '')}")
        for s in settings.group(key):
            click.echo(f"  {s.variable}  [default: {s.default_text().replace('`', '')}]")
            click.echo(f"      {s.help.replace('`', '')}")
