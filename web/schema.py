"""Which database schemas this code runs on: the expand/contract rule for rolling upgrades.

A release is rolled out host by host after its migrations ran, so for a while the previous
release's processes run on the new schema, and any of them may restart then (a crash, an
OOM kill, a reboot). The rule that makes that safe:

- every migration module says ``compatible_with_previous = True`` when the code of the
  revision before it keeps working on the schema after it: an *expand* step (a new table, a
  nullable or defaulted column, an index, a constraint the old code's writes already meet).
  Anything that drops, renames or narrows what older code reads or writes (a *contract*
  step) says ``False``, and ships one release after the code stopped using it;
- ``MINIMUM_REVISION`` below is the oldest schema this code runs on: the newest migration
  whose tables or columns the code uses. Raise it whenever code starts using one.

Older code cannot read the newer release's migration modules, so ``migrations/env.py``
copies every revision's ``down_revision`` and flag into the ``schema_revisions`` table after
each ``db upgrade``/``db downgrade``; a process whose code is older than the database walks
that chain from the database's revision down to its own head.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import inspect, select
from sqlalchemy.engine import Engine

# The oldest schema revision this code runs on (see the module's docstring).
MINIMUM_REVISION = "0011"
SCHEMA_REVISIONS = "schema_revisions"


@dataclass(frozen=True)
class SchemaState:
    """The database's revision against the code's, and what to do about it."""
    current: str | None
    head: str
    usable: bool
    summary: str  # one line: "ok", or what differs (for /healthz and `db current`)
    advice: str = ""  # the command or step that fixes an unusable schema


@functools.cache
def code_chain() -> tuple[tuple[str, str | None, bool], ...]:
    """This code's migrations, newest first: (revision, down_revision, compatible_with_previous)."""
    from alembic.script import ScriptDirectory

    from .db import alembic_config

    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return tuple((s.revision, _down(s.down_revision), is_compatible(s.module))
                 for s in script.walk_revisions())


def is_compatible(module) -> bool:
    """A migration without the marker is a contract step: it may break older code."""
    return getattr(module, "compatible_with_previous", False) is True


def _down(down_revision) -> str | None:
    if isinstance(down_revision, (tuple, list)):  # a merge point: follow its first parent
        return down_revision[0] if down_revision else None
    return down_revision


def recorded_chain(connection) -> dict[str, tuple[str | None, bool]]:
    """The chain the newest release that migrated this database left in ``schema_revisions``
    ({} when the table is absent: a database migrated before the rule existed)."""
    if SCHEMA_REVISIONS not in inspect(connection).get_table_names():
        return {}
    from .models import SchemaRevision

    rows = connection.execute(select(SchemaRevision.revision, SchemaRevision.down_revision,
                                     SchemaRevision.compatible_with_previous))
    return {rev: (down, bool(flag)) for rev, down, flag in rows}


def judge(current: str | None, head: str, chain, recorded: dict,
          minimum: str = MINIMUM_REVISION) -> SchemaState:
    """The verdict for a database at ``current`` and code at ``head`` whose own migrations
    are ``chain`` (``code_chain()``'s shape); ``recorded`` is ``recorded_chain()``."""
    known = [rev for rev, _down, _flag in chain]  # newest first
    upgrade = "Run `attn-grader db upgrade` (with the same ATTN_GRADER_DATABASE_URL) first."
    if current is None:
        return SchemaState(current, head, False, "has no tables yet", upgrade)
    if current == head:
        return SchemaState(current, head, True, "ok")
    if current in known:  # behind this code
        usable = minimum in known and known.index(current) <= known.index(minimum)
        if usable:
            return SchemaState(current, head, True,
                               f"at revision {current}, behind the code's {head} "
                               f"(this code needs {minimum} or later)")
        return SchemaState(current, head, False,
                           f"is at revision {current}; this code needs revision {minimum} "
                           f"or later (its own is {head})", upgrade)
    # Unknown to this code: a newer release migrated it. Walk its record down to our head.
    older = (f"This code is older than the database: install the release that migrated it "
             f"(upgrade the code on this host), or, to go back to this release, run "
             f"`attn-grader db downgrade {head}` with the newer release's code.")
    rev, seen = current, set()
    while rev != head:
        if rev in seen or rev not in recorded:
            why = "records no compatibility with earlier code" if not recorded else \
                f"its recorded history does not lead to this code's revision {head}"
            return SchemaState(current, head, False,
                               f"is at revision {current}, newer than this code's {head}, and "
                               f"{why}", older)
        seen.add(rev)
        down, compatible = recorded[rev]
        if not compatible:
            return SchemaState(current, head, False,
                               f"is at revision {current}, newer than this code's {head}; "
                               f"migration {rev} is not compatible with earlier code", older)
        rev = down
    return SchemaState(current, head, True,
                       f"at revision {current}, ahead of the code's {head} "
                       f"(every migration since is compatible)")


def schema_state(engine: Engine) -> SchemaState:
    from alembic.runtime.migration import MigrationContext

    chain = code_chain()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
        known = {rev for rev, _d, _f in chain}
        recorded = recorded_chain(conn) if current is not None and current not in known else {}
    return judge(current, chain[0][0], chain, recorded)


def record_chain(connection, script, current: str | None) -> None:
    """Write ``schema_revisions`` from ``current`` down (called by migrations/env.py in the
    migration's transaction, with the migrating release's ``ScriptDirectory``)."""
    if current is None or SCHEMA_REVISIONS not in inspect(connection).get_table_names():
        return
    from .models import SchemaRevision

    table = SchemaRevision.__table__
    rows = [{"revision": s.revision, "down_revision": _down(s.down_revision),
             "compatible_with_previous": is_compatible(s.module)}
            for s in script.walk_revisions(base="base", head=current)]
    connection.execute(table.delete())
    if rows:
        connection.execute(table.insert(), rows)
