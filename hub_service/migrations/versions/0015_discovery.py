"""issue 34 (discovery declarations): placeholder, filled by the work on that issue

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 04:00:00
"""

from __future__ import annotations

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
