"""issue 37 (leadership, registry GC, lock owners): placeholder, filled by the work on that issue

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
