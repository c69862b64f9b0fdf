"""Alembic environment: the models' metadata, our engine set-up, batch mode for SQLite."""
from logging.config import fileConfig

from alembic import context

from web.config import load_config
from web.db import make_engine
from web.lti import models as _lti_models  # noqa: F401 (the LTI plug-in's tables)
from web.models import Base

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


def run_migrations_online() -> None:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            # render_as_batch: SQLite cannot ALTER most things in place; batch mode copies the
            # table, and on PostgreSQL the same revision runs as plain ALTERs.
            context.configure(connection=connection, target_metadata=target_metadata,
                              render_as_batch=True, compare_type=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
