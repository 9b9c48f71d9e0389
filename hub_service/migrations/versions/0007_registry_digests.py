"""images in the registry: each version's pushed image and digest (issue 23)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("registry_ref", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("image_digest", sa.String(length=71), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("image_digest")
        batch.drop_column("registry_ref")
