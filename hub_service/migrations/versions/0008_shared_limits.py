"""rate limits and play caps shared by every Hub process, in the database (issue 23)

`rate_buckets`: one token bucket per (category, client), updated in one statement per request.
`play_leases`: the play sessions and model tries held now, each by one Hub process that renews
its leases while it lives; expired leases no longer count.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_buckets",
        sa.Column("category", sa.String(length=16), nullable=False),
        sa.Column("client", sa.String(length=128), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("category", "client", name=op.f("pk_rate_buckets")),
    )
    op.create_index("ix_rate_buckets_category_updated_at", "rate_buckets", ["category", "updated_at"])
    op.create_table(
        "play_leases",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("visitor", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("env_id", sa.String(length=255), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_play_leases")),
    )
    op.create_index("ix_play_leases_visitor_expires_at", "play_leases", ["visitor", "expires_at"])
    op.create_index("ix_play_leases_holder", "play_leases", ["holder"])
    op.create_index("ix_play_leases_expires_at", "play_leases", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_play_leases_expires_at", table_name="play_leases")
    op.drop_index("ix_play_leases_holder", table_name="play_leases")
    op.drop_index("ix_play_leases_visitor_expires_at", table_name="play_leases")
    op.drop_table("play_leases")
    op.drop_index("ix_rate_buckets_category_updated_at", table_name="rate_buckets")
    op.drop_table("rate_buckets")
