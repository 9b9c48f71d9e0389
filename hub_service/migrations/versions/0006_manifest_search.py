"""manifest search: text search also matches the openenv.yaml description and tags

`environments.manifest_text` holds the current revision's manifest description and `#tag `
tokens (as `search_text` holds the README card's); existing rows are filled from the manifest
their current revision stored.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 04:30:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _text(manifest: Any) -> str:
    # Frozen copy of hub_service.catalog.service.manifest_search_text as of this revision.
    if not isinstance(manifest, dict):
        return ""
    description, tags = manifest.get("description"), manifest.get("tags")
    words = description.lower()[:4000] if isinstance(description, str) else ""
    tokens = "".join(
        f"#{t.lower()[:64]} " for t in (tags if isinstance(tags, list) else [])[:64] if isinstance(t, str) and t.strip()
    )
    return f"{words} {tokens}" if words or tokens else ""


def upgrade() -> None:
    with op.batch_alter_table("environments") as batch:
        batch.add_column(sa.Column("manifest_text", sa.Text(), server_default="", nullable=False))
    environments = sa.table(
        "environments",
        sa.column("id", sa.Integer),
        sa.column("latest_version_id", sa.Integer),
        sa.column("manifest_text", sa.Text),
    )
    versions = sa.table("env_versions", sa.column("id", sa.Integer), sa.column("manifest", sa.JSON))
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(environments.c.id, versions.c.manifest).join(
            versions, versions.c.id == environments.c.latest_version_id
        )
    ).all()
    for env_id, manifest in rows:
        text = _text(manifest)
        if text:
            conn.execute(environments.update().where(environments.c.id == env_id).values(manifest_text=text))


def downgrade() -> None:
    with op.batch_alter_table("environments") as batch:
        batch.drop_column("manifest_text")
