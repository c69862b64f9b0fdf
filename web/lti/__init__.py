"""LTI 1.3: the grader as a tool in an LMS (Moodle, Canvas, ...), a plug-in of the app.

``init_app(app)`` (called by ``create_app``) wires it in: the passback hooks on the app's
database sessions (``hooks.py``) and, where the app serves pages, the LTI endpoints, the
instructor's LTI page and the frame session (``views.py``, ``frame.py``). A grading worker,
which has no app, calls ``init_engine(engine)`` for the hooks alone. Importing the core
(``web.models``) wires in nothing: the core does not import this package.

The LTI tables (``models.py``) join ``web.models.Base.metadata`` when this package's models
are imported, as the migrations' environment does.
"""
from __future__ import annotations


def init_engine(engine) -> None:
    """Scores changed in sessions on ``engine``'s database go to the LMS passback outbox."""
    from . import hooks

    hooks.install(engine)


def init_app(app) -> None:
    init_engine(app.extensions["attn_grader"].engine)
    if app.config["PAGES"]:  # the endpoints render pages and use the pages' forms and helpers
        from . import frame, keys, views

        keys.ensure_signing_key(app.extensions["attn_grader"].engine)

        app.register_blueprint(views.bp)
        frame.init_app(app)  # LTI pages inside the LMS's page: a session carried by the URLs
