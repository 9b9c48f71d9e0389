"""discovery declarations: each revision keeps what its discovery.json, README and pyproject declare

`env_versions.discovery` holds the record hub_service.catalog.discovery.read_discovery made when
the revision was validated (task description, tags, representative queries, license, agent tools,
and warnings naming malformed fields). Existing revisions have none until they run again.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("discovery", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("discovery")
