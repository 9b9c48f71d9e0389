"""Image signatures: each published revision keeps the cosign signature of its image

`env_versions.signature` holds what the publish stage signed and read back from the registry
(hub_service/signing.py): the signature's tag, payload, signature and key id. The resolve
record carries it, checked against the Hub's key. Revisions published before have none until they
are published again.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 23:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("signature", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("signature")
