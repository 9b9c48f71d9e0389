"""catalog pages from indexes: the listing's sorts (name, likes, updated) each have an index that
holds the order the page is read in (issue 49): a page of 50,000 envs reads its rows in order and
stops, instead of sorting every row

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 19:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_INDEXES = {
    "ix_environments_gone_name_id": ["gone", "name", "id"],
    "ix_environments_gone_likes_id": ["gone", "likes", "id"],
    "ix_environments_gone_updated_at_id": ["gone", "updated_at", "id"],
}


def upgrade() -> None:
    for name, columns in _INDEXES.items():
        op.create_index(name, "environments", columns)


def downgrade() -> None:
    for name in _INDEXES:
        op.drop_index(name, table_name="environments")
