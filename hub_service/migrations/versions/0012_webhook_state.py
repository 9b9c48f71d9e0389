"""webhook deliveries handled by state, not by bytes; the reconcile's drift (issue 30)

`webhook_deliveries.key` is no longer unique (the Hub sends no delivery id: a genuine repeat of a
change is byte-identical, and is applied); `webhook_subjects` remembers each repo's last payload
for the short replay window; `reconcile_drift` records how many envs each reconcile pass corrected.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_constraint("uq_webhook_deliveries_key", type_="unique")
        batch.create_index(batch.f("ix_webhook_deliveries_key"), ["key"], unique=False)
    op.create_table(
        "webhook_subjects",
        sa.Column("subject", sa.String(length=300), nullable=False),
        sa.Column("last_key", sa.String(length=64), nullable=False),
        sa.Column("last_delivery", sa.Integer(), nullable=True),
        sa.Column("seen_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("subject", name=op.f("pk_webhook_subjects")),
    )
    op.create_table(
        "reconcile_drift",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("seen", sa.Integer(), nullable=False),
        sa.Column("corrected", sa.Integer(), nullable=False),
        sa.Column("baseline", sa.Boolean(), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reconcile_drift")),
    )
    op.create_index(op.f("ix_reconcile_drift_source"), "reconcile_drift", ["source"])


def downgrade() -> None:
    op.drop_index(op.f("ix_reconcile_drift_source"), table_name="reconcile_drift")
    op.drop_table("reconcile_drift")
    op.drop_table("webhook_subjects")
    # Byte-identical deliveries may now have several rows; the old unique key keeps the first.
    op.execute("DELETE FROM webhook_deliveries WHERE id NOT IN (SELECT MIN(id) FROM webhook_deliveries GROUP BY key)")
    with op.batch_alter_table("webhook_deliveries") as batch:
        batch.drop_index(batch.f("ix_webhook_deliveries_key"))
        batch.create_unique_constraint("uq_webhook_deliveries_key", ["key"])
