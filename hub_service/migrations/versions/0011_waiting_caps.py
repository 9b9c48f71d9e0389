"""bounded waits for the infrastructure (issue 29)

`jobs.infra_waits`, `jobs.first_waited_at`: how many times a job was given back because the
infrastructure failed it, and when the first time was; never reset by a wake-up (`infra_retries`,
which sets the backoff, is), so that the Hub's caps (`infra_wait_max_count`, `infra_wait_max_s`)
end every wait. `env_versions.failure_code`: the wait code a revision that gave up waiting failed
with (no_engine, engine_lost, base_image, network, ...), shown by the API beside its stage and reason.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("infra_waits", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("first_waited_at", hub_service.db.UTCDateTime(timezone=True), nullable=True))
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("failure_code", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("failure_code")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("first_waited_at")
        batch.drop_column("infra_waits")
