"""Every ``ATTN_GRADER_*`` setting is declared once (grader/settings.py), read through that
registry, and documented from it: the Configuration page's table (docs/operators/configuration.md)
is the registry's, row for row."""
import ast
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import settings
from grader.cli import main
from web.config import SERVICE_GROUPS, load_config

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"ATTN_GRADER_[A-Z0-9_]*[A-Z0-9]")
SETTINGS_PAGE = ROOT / "docs" / "operators" / "configuration.md"
DOCS_TABLE = re.compile(r"<!-- settings table: .*? -->\n(.*?)\n<!-- end of settings table -->", re.S)
# A read of the environment: os.environ.get(...), os.getenv(...), os.environ[...] (not assigned).
ENV_READ = re.compile(r"(?:os\.environ\.get|os\.getenv|environ\.get)\(|os\.environ\[[^\]]*\](?!\s*=[^=])"
                      r"|envvar=")


def _reads_a_setting(line: str) -> bool:
    return (bool(ENV_READ.search(line)) and ("ATTN_GRADER_" in line or "PREFIX" in line)
            and not line.lstrip().startswith("del "))


# Students' files the tests grade (some hostile, some written not to parse): not the project's code.
SUBMISSIONS = ("tests/hostile/", "tests/corpus/", "tests/integrity/", "tests/honest_under_block/")
TASK_CORPUS = re.compile(r"grader/tasks/[^/]+/corpus/")  # each task's corpus: submissions too


def _tracked(*suffixes: str) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / f for f in out.stdout.split() if f.endswith(suffixes) and (ROOT / f).is_file()
            and not f.startswith(SUBMISSIONS) and not TASK_CORPUS.match(f) and ROOT / f != Path(__file__).resolve()]  # its examples


def test_the_configuration_page_s_table_is_the_registry_s():
    table = DOCS_TABLE.search(SETTINGS_PAGE.read_text(encoding="utf-8"))
    assert table, f"{SETTINGS_PAGE.relative_to(ROOT)} lost its generated settings table"
    assert table.group(1) == settings.markdown_table(), \
        f"{SETTINGS_PAGE.relative_to(ROOT)}'s settings table is stale: paste `attn-grader config settings --markdown`"


def test_the_command_prints_every_setting_and_the_docs_table():
    runner = CliRunner()
    markdown = runner.invoke(main, ["config", "settings", "--markdown"])
    assert markdown.exit_code == 0, markdown.output
    assert markdown.output.rstrip("\n") == settings.markdown_table()
    plain = runner.invoke(main, ["config", "settings"])
    assert plain.exit_code == 0, plain.output
    for declared in settings.SETTINGS:
        assert declared.variable in plain.output
    assert "[default: 2147483648 (2 GiB)]" in plain.output  # SANDBOX_MEMORY_BYTES, without Markdown


def test_every_name_the_tree_mentions_is_declared():
    undeclared = {}
    for path in _tracked(".py", ".md", ".example", ".conf", ".yml", ".service", "Makefile", ".toml"):
        for name in NAME.findall(path.read_text(encoding="utf-8", errors="replace")):
            if name[len(settings.PREFIX):] not in settings.BY_NAME:
                undeclared.setdefault(name, str(path.relative_to(ROOT)))
    # The hostile suite plants this in the grader's environment to prove it never reaches a child.
    undeclared.pop("ATTN_GRADER_TEST_SECRET", None)
    assert not undeclared, f"declare these in grader/settings.py (or rename them): {undeclared}"


def test_only_the_registry_reads_the_environment_for_a_setting():
    readers = []
    for path in _tracked(".py"):
        if path == ROOT / "grader" / "settings.py":
            continue
        source = path.read_text(encoding="utf-8-sig")
        for number, line in enumerate(source.splitlines(), 1):
            if _reads_a_setting(line):
                readers.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
        # A variable name held in a constant would slip past the line check: os.environ.get and
        # os.getenv take literal names everywhere else.
        for node in ast.walk(ast.parse(source)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and ast.unparse(node.func) in ("os.environ.get", "os.getenv")
                    and not (node.args and isinstance(node.args[0], ast.Constant))):
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert not readers, "read these through grader.settings.value():\n" + "\n".join(readers)


def test_the_grep_finds_a_reader():
    # The check above, on lines it must catch and lines it must leave alone.
    caught = ['x = os.environ.get("ATTN_GRADER_WORKERS")', 'os.environ[PREFIX + name]',
              '@click.option("--server", envvar="ATTN_GRADER_SERVER")']
    passed = ['os.environ["ATTN_GRADER_TEST_SECRET"] = SECRET', 'env["ATTN_GRADER_" + key] = value',
              'os.environ.get("CUDA_VISIBLE_DEVICES")', 'del os.environ["ATTN_GRADER_SANDBOX_PREWARM"]']
    assert all(_reads_a_setting(line) for line in caught)
    assert not any(_reads_a_setting(line) for line in passed)


@pytest.mark.parametrize("name, raw, message", [
    ("WORKERS", "x", "ATTN_GRADER_WORKERS='x': expected an integer"),
    ("LEASE_SECONDS", "soon", "ATTN_GRADER_LEASE_SECONDS='soon': expected a number"),
    ("PAGES", "maybe", "ATTN_GRADER_PAGES='maybe': expected true or false"),
    ("SANDBOX", "docker", "ATTN_GRADER_SANDBOX='docker': expected auto, strict or none"),
    ("SANDBOX_SECCOMP", "off", "ATTN_GRADER_SANDBOX_SECCOMP='off': expected allow-list, deny-list or log"),
])
def test_a_malformed_value_is_named_with_what_was_expected(name, raw, message):
    with pytest.raises(ValueError) as caught:
        settings.value(name, {settings.PREFIX + name: raw})
    assert str(caught.value) == message


def test_values_are_typed_and_empty_means_unset():
    env = {"ATTN_GRADER_WORKERS": " 5 ", "ATTN_GRADER_PAGES": "off", "ATTN_GRADER_LEASE_SECONDS": "1.5",
           "ATTN_GRADER_SMTP_HOST": "", "ATTN_GRADER_SANDBOX_PREWARM": "yes"}
    assert settings.value("WORKERS", env) == 5
    assert settings.value("PAGES", env) is False
    assert settings.value("LEASE_SECONDS", env) == 1.5
    assert settings.value("SMTP_HOST", env) is None
    assert settings.value("SANDBOX_PREWARM", env) is True
    assert settings.value("API_RATE_LIMIT", {}) == "120 per minute"
    with pytest.raises(KeyError, match="ATTN_GRADER_NOPE is not a declared setting"):
        settings.value("NOPE")


def test_every_declaration_is_well_formed():
    assert len(settings.BY_NAME) == len(settings.SETTINGS)  # no name declared twice
    for s in settings.SETTINGS:
        assert s.group in settings.GROUPS and s.type in (str, int, float, bool) and s.help, s
        assert s.default is None or isinstance(s.default, s.type), s
        assert not s.choices or s.default is None or s.default in s.choices, s


def test_the_service_config_carries_its_groups_and_checks_code_given_values(tmp_path):
    config = load_config({"INSTANCE_PATH": str(tmp_path)}, environ={})
    service = {s.name for s in settings.SETTINGS if s.group in SERVICE_GROUPS}
    assert service <= set(config) and "SANDBOX_MEMORY_BYTES" not in config
    assert config["HTTPS"] is False and config["TRUSTED_PROXIES"] == 0 and config["METRICS_TOKEN"] is None
    assert load_config({"INSTANCE_PATH": str(tmp_path)},
                       environ={"ATTN_GRADER_TRUSTED_PROXIES": "2"})["TRUSTED_PROXIES"] == 2
    with pytest.raises(ValueError, match="ATTN_GRADER_SANDBOX='docker'"):
        load_config({"INSTANCE_PATH": str(tmp_path), "SANDBOX": "docker"}, environ={})
