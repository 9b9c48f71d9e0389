"""RFC 008 reports: each revision keeps its ValidationReportV2 in the hub lane

`env_versions.rfc008` holds the report hub_service.pipeline.rfc008 made: the static level once
the revision is validated, every level once its smoke test ran. Existing revisions have none
until they run again.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-05 02:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("rfc008", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("rfc008")
