"""LTI people keyed by (issuer, sub), not by registration; duplicate accounts merged.

LTI makes a launch's ``sub`` unique per issuer. Until now ``lti_users`` was keyed by
(registration, sub), so a second registration of the same LMS (a dynamic registration
next to a manual one) gave its users new, empty accounts (review 3, M3). This migration:

1. adds ``lti_users.issuer``, filled from each row's platform;
2. merges the accounts of one (issuer, sub): the oldest account stays, and every row of the
   newer ones (submissions, quiz attempts, enrollments, extensions, score syncs, tokens,
   whatever refers to ``users.id``) moves to it; a moved row that would collide with one the
   oldest account already has on a unique key (both enrolled in the course) is dropped.
   The person keeps one ``lti_users`` row, with what the LMS said of them filled in from
   the others; an emptied account is deleted; instructor rights carry over;
3. keys ``lti_users`` by (issuer, sub) and keeps a row when its registration is removed
   (``platform_id`` becomes the registration that last launched the person, SET NULL).

Downgrade restores the old key (rows of removed registrations are dropped); merged accounts
stay merged.

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

_PERSON_FIELDS = ("lms_user_id", "sis_user_id", "login_id", "given_name", "family_name")


def upgrade() -> None:
    with op.batch_alter_table("lti_users") as batch:
        batch.add_column(sa.Column("issuer", sa.String(length=255), nullable=True))
    bind = op.get_bind()
    bind.execute(sa.text("UPDATE lti_users SET issuer = (SELECT p.issuer FROM lti_platforms p "
                         "WHERE p.id = lti_users.platform_id)"))
    _merge_people(bind)
    with op.batch_alter_table("lti_users") as batch:
        batch.alter_column("issuer", existing_type=sa.String(length=255), nullable=False)
        batch.alter_column("platform_id", existing_type=sa.Integer(), nullable=True)
        batch.drop_constraint("uq_lti_users_platform_sub", type_="unique")
        batch.create_unique_constraint("uq_lti_users_issuer_sub", ["issuer", "sub"])
        batch.drop_constraint("fk_lti_users_platform_id_lti_platforms", type_="foreignkey")
        batch.create_foreign_key("fk_lti_users_platform_id_lti_platforms", "lti_platforms",
                                 ["platform_id"], ["id"], ondelete="SET NULL")


def downgrade() -> None:
    op.get_bind().execute(sa.text("DELETE FROM lti_users WHERE platform_id IS NULL"))
    with op.batch_alter_table("lti_users") as batch:
        batch.drop_constraint("fk_lti_users_platform_id_lti_platforms", type_="foreignkey")
        batch.create_foreign_key("fk_lti_users_platform_id_lti_platforms", "lti_platforms",
                                 ["platform_id"], ["id"], ondelete="CASCADE")
        batch.drop_constraint("uq_lti_users_issuer_sub", type_="unique")
        batch.create_unique_constraint("uq_lti_users_platform_sub", ["platform_id", "sub"])
        batch.alter_column("platform_id", existing_type=sa.Integer(), nullable=False)
        batch.drop_column("issuer")


# ---- merging ------------------------------------------------------------------------------

def _user_references(bind) -> list[tuple[str, str, list[list[str]]]]:
    """(table, column, the other columns of each unique key that includes it) for every
    foreign key to ``users.id`` but those of ``lti_users``, read from the database itself:
    tables this migration does not know of move too."""
    inspector = sa.inspect(bind)
    found = []
    for table in inspector.get_table_names():
        if table == "lti_users":
            continue
        for fk in inspector.get_foreign_keys(table):
            if fk["referred_table"] != "users" or len(fk["constrained_columns"]) != 1:
                continue
            column = fk["constrained_columns"][0]
            keys = [u["column_names"] for u in inspector.get_unique_constraints(table)]
            keys += [i["column_names"] for i in inspector.get_indexes(table) if i.get("unique")]
            others = [[c for c in key if c != column] for key in keys if column in key]
            found.append((table, column, others))
    return found


def _move_rows(bind, references, keep: int, drop: int) -> None:
    for table, column, unique_others in references:
        for others in unique_others:
            same = " AND ".join(f"k.{c} = {table}.{c}" for c in others) or "1 = 1"
            bind.execute(sa.text(
                f"DELETE FROM {table} WHERE {column} = :drop AND EXISTS (SELECT 1 FROM {table} k "
                f"WHERE k.{column} = :keep AND {same})"), {"keep": keep, "drop": drop})
        bind.execute(sa.text(f"UPDATE {table} SET {column} = :keep WHERE {column} = :drop"),
                     {"keep": keep, "drop": drop})


def _merge_people(bind) -> None:
    groups = bind.execute(sa.text(
        "SELECT issuer, sub FROM lti_users WHERE issuer IS NOT NULL "
        "GROUP BY issuer, sub HAVING COUNT(*) > 1")).all()
    if not groups:
        return
    references = _user_references(bind)
    for issuer, sub in groups:
        rows = bind.execute(sa.text(
            "SELECT l.id, l.user_id, u.role, " + ", ".join(f"l.{f}" for f in _PERSON_FIELDS)
            + " FROM lti_users l JOIN users u ON u.id = l.user_id "
            "WHERE l.issuer = :issuer AND l.sub = :sub ORDER BY u.created_at, u.id, l.id"),
            {"issuer": issuer, "sub": sub}).mappings().all()
        kept, keep_user = rows[0], rows[0]["user_id"]
        person = {f: kept[f] for f in _PERSON_FIELDS}
        for row in reversed(rows[1:]):  # the newest registration's word first
            for f in _PERSON_FIELDS:
                person[f] = person[f] or row[f]
        for row in rows[1:]:
            bind.execute(sa.text("DELETE FROM lti_users WHERE id = :id"), {"id": row["id"]})
            if row["user_id"] == keep_user:
                continue
            _move_rows(bind, references, keep_user, row["user_id"])
            if row["role"] == "instructor":
                bind.execute(sa.text("UPDATE users SET role = 'instructor' WHERE id = :id"),
                             {"id": keep_user})
            still_linked = bind.execute(sa.text(
                "SELECT COUNT(*) FROM lti_users WHERE user_id = :id"), {"id": row["user_id"]}).scalar()
            if not still_linked:
                bind.execute(sa.text("DELETE FROM users WHERE id = :id"), {"id": row["user_id"]})
        bind.execute(sa.text(
            "UPDATE lti_users SET " + ", ".join(f"{f} = :{f}" for f in _PERSON_FIELDS)
            + " WHERE id = :id"), {**person, "id": kept["id"]})
