"""rate limits and play caps shared by every Hub process, in the database (issue 23)

(Placeholder until its change lands: upgrade and downgrade do nothing yet.)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
