"""lock files and pins the Hub keeps images for (issue 23)

(Placeholder until its change lands: upgrade and downgrade do nothing yet.)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
