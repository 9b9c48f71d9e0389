"""one leader for the periodic duties, registry collection's record, lock owners (issue 37)

`service_leases`: one row per duty group (`duties`): the Hub process that holds it runs the crawl,
the health poll and image collection; it renews the lease while it lives, and another process takes
the row once the lease has run out. `term` grows with every change of holder.
`duty_runs`: each run of a periodic duty, by whom and when (leadership is checked against it).
`registry_deletions`: each image collection from the registry, planned (dry run) and done.
`image_locks.owner`: the Hugging Face user who registered a lock (quota per user).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "service_leases",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("term", sa.Integer(), nullable=False),
        sa.Column("acquired_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_service_leases")),
    )
    op.create_table(
        "duty_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("duty", sa.String(length=16), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("term", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_duty_runs")),
    )
    op.create_index("ix_duty_runs_started_at", "duty_runs", ["started_at"])
    op.create_table(
        "registry_deletions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("repository", sa.String(length=255), nullable=False),
        sa.Column("digest", sa.String(length=80), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=True),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False, server_default=""),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_registry_deletions")),
        sa.CheckConstraint(
            "outcome IN ('planned', 'deleted', 'gone', 'failed')", name=op.f("ck_registry_deletions_outcome")
        ),
    )
    op.create_index("ix_registry_deletions_at", "registry_deletions", ["at"])
    with op.batch_alter_table("image_locks") as batch:
        batch.add_column(sa.Column("owner", sa.String(length=96), nullable=True))
    op.create_index("ix_image_locks_owner_expires_at", "image_locks", ["owner", "expires_at"])


def downgrade() -> None:
    op.drop_index("ix_image_locks_owner_expires_at", table_name="image_locks")
    with op.batch_alter_table("image_locks") as batch:
        batch.drop_column("owner")
    op.drop_index("ix_registry_deletions_at", table_name="registry_deletions")
    op.drop_table("registry_deletions")
    op.drop_index("ix_duty_runs_started_at", table_name="duty_runs")
    op.drop_table("duty_runs")
    op.drop_table("service_leases")
