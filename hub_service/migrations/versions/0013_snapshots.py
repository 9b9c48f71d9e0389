"""forkable badge: environments.forkable, the fork check's verdict of the current passing revision

The check itself is kept with the version's determinism record (`env_versions.determinism`,
under `fork`); this column is the catalog's filterable flag, like `deterministic` (0005).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("environments") as batch:
        batch.add_column(sa.Column("forkable", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("environments") as batch:
        batch.drop_column("forkable")
