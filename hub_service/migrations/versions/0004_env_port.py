"""env port: the port each checked revision's server listens on

Read once, at validation, from the manifest's `port`, else the README's `app_port`, else 8000
(`openenv.manifest.env_port`): smoke tests, play sessions and resolve records use it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("port", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("port")
