"""lock files and pins the Hub keeps images for (issue 23)

`image_locks`: lock files `openenv lock` registered (id: the sha256 of the lock's canonical JSON),
live until `expires_at`; `image_lock_entries`: the versions each names. `env_versions.pinned_at`:
when a client last resolved the version by an explicit pin (full sha or image digest). Image
collection keeps the images of versions a live lock names and of unyanked pinned versions.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "image_locks",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("expires_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("renewed_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_image_locks")),
    )
    op.create_index("ix_image_locks_expires_at", "image_locks", ["expires_at"])
    op.create_table(
        "image_lock_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("lock_id", sa.String(length=64), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["lock_id"], ["image_locks.id"], name=op.f("fk_image_lock_entries_lock_id_image_locks"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["env_versions.id"],
            name=op.f("fk_image_lock_entries_version_id_env_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_image_lock_entries")),
    )
    op.create_index(op.f("ix_image_lock_entries_lock_id"), "image_lock_entries", ["lock_id"])
    op.create_index(op.f("ix_image_lock_entries_version_id"), "image_lock_entries", ["version_id"])
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("pinned_at", hub_service.db.UTCDateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("pinned_at")
    op.drop_index(op.f("ix_image_lock_entries_version_id"), table_name="image_lock_entries")
    op.drop_index(op.f("ix_image_lock_entries_lock_id"), table_name="image_lock_entries")
    op.drop_table("image_lock_entries")
    op.drop_index("ix_image_locks_expires_at", table_name="image_locks")
    op.drop_table("image_locks")
