"""waiting for infrastructure: versions that wait on the machine, not on the env

A revision whose run stopped for a reason outside the env (no Docker engine, the engine restarted,
a base image or source that cannot be reached) is in state "waiting": why (a reason code and the
message) and since when are kept on the version; the job counts its infrastructure retries, which
set its backoff and never use up its attempts.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 15:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("waiting_code", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("waiting_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("waiting_since", hub_service.db.UTCDateTime(timezone=True), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("infra_retries", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("infra_retries")
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("waiting_since")
        batch.drop_column("waiting_reason")
        batch.drop_column("waiting_code")
