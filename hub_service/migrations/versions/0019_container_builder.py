"""the builder of images is "container", not "docker": it builds on whichever engine is set (issue 48)

`env_versions.builder` said "docker" for an image built by the container engine, Podman's too. The
rows that say so now say "container", and `ck_env_versions_builder` allows ('container', 'process').
The lists are written out here, not imported: a migration says what the schema was at its revision.
A downgrade turns "container" back into "docker" and restores the old constraint.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_NAME = "ck_env_versions_builder"  # final (`op.f`), not run through the naming convention again
_BEFORE = ("docker", "process")
_AFTER = ("container", "process")


def _condition(values: tuple[str, ...]) -> str:
    return f"builder IS NULL OR builder IN ({', '.join(repr(v) for v in values)})"


def _rename(old: str, new: str, allowed: tuple[str, ...]) -> None:
    # The old constraint goes first (it refuses the new word), then the rows change, then the new
    # constraint comes; in batch mode, so that SQLite rebuilds the table around each change.
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_constraint(op.f(_NAME), type_="check")
    op.get_bind().execute(
        sa.text("UPDATE env_versions SET builder = :new WHERE builder = :old"), {"new": new, "old": old}
    )
    with op.batch_alter_table("env_versions") as batch:
        batch.create_check_constraint(op.f(_NAME), _condition(allowed))


def upgrade() -> None:
    _rename("docker", "container", _AFTER)


def downgrade() -> None:
    _rename("container", "docker", _BEFORE)
