"""issue 29 (bounded waits): placeholder, filled by the work on that issue

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
