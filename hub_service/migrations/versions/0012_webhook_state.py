"""issue 30 (webhook deliveries by state): placeholder, filled by the work on that issue

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
