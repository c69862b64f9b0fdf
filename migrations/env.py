"""Alembic environment: the models' metadata, our engine set-up, batch mode for SQLite.

On PostgreSQL every migration runs in a transaction of its own with a ``lock_timeout``
(``ATTN_GRADER_MIGRATION_LOCK_TIMEOUT``): an ``ALTER TABLE`` that queues behind a long
transaction would otherwise hold every later query on that table behind it; with the
timeout that migration fails and is rolled back (the ones before it stay applied), and
`attn-grader db upgrade` can simply be run again.
A migration that builds an index on a large table does so ``CONCURRENTLY`` inside
``op.get_context().autocommit_block()`` (docs/operators/upgrading.md states the rule).

After each migration the chain as this release knows it is written to ``schema_revisions``,
so that older code can tell whether it may run on this schema (``web.schema``).
"""
from logging.config import fileConfig

from alembic import context

from grader import settings
from web.config import load_config
from web.db import make_engine
from web.lti import models as _lti_models  # noqa: F401 (the LTI plug-in's tables)
from web.models import Base
from web.schema import record_chain

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)

url = config.get_main_option("sqlalchemy.url") or load_config()["DATABASE_URL"]
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def _record(ctx, step, heads, run_args) -> None:  # Alembic's on_version_apply hook
    record_chain(ctx.connection, context.script, next(iter(heads), None))


def run_migrations_online() -> None:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            if connection.dialect.name == "postgresql":
                timeout = int(settings.value("MIGRATION_LOCK_TIMEOUT"))
                connection.exec_driver_sql(f"SET lock_timeout = {timeout * 1000}")  # ms
                connection.commit()
            # render_as_batch: SQLite cannot ALTER most things in place; batch mode copies the
            # table, and on PostgreSQL the same revision runs as plain ALTERs.
            context.configure(connection=connection, target_metadata=target_metadata,
                              render_as_batch=True, compare_type=True,
                              transaction_per_migration=True, on_version_apply=_record)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
