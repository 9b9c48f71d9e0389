"""images in the registry: each version's pushed image and digest (issue 23)

(Placeholder until its change lands: upgrade and downgrade do nothing yet.)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
