"""states and kinds are enums stored by value, with CHECK constraints (issue 20)

(Placeholder until its change lands: upgrade and downgrade do nothing yet.)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
