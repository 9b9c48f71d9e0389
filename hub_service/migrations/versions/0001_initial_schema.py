"""initial schema: environments, their versions, pipeline jobs and stage runs

Revision ID: 0001
Revises:
Create Date: 2026-11-29 22:15:18.266709
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.String(length=96), nullable=False),
        sa.Column("name", sa.String(length=96), nullable=False),
        sa.Column("title", sa.String(length=256), nullable=True),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("likes", sa.Integer(), nullable=False),
        sa.Column("private", sa.Boolean(), nullable=False),
        sa.Column("trusted", sa.Boolean(), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=True),
        sa.Column("stage", sa.String(length=32), nullable=True),
        sa.Column("subdomain", sa.String(length=255), nullable=True),
        sa.Column("host", sa.String(length=512), nullable=True),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False),
        sa.Column("last_modified", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("indexed_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("created_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("gone", sa.Boolean(), nullable=False),
        sa.Column("gone_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("cold_start_s", sa.Float(), nullable=True),
        sa.Column("step_p50_ms", sa.Float(), nullable=True),
        sa.Column("latest_version_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
        sa.UniqueConstraint("owner", "name", name="uq_environments_owner_name"),
    )
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.create_index("ix_environments_gone", ["gone"], unique=False)
        batch_op.create_index("ix_environments_status_name", ["status", "name"], unique=False)

    op.create_table(
        "env_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.Integer(), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column("ref", sa.String(length=128), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("manifest", sa.JSON(), nullable=True),
        sa.Column("readme", sa.Text(), nullable=True),
        sa.Column("validation", sa.JSON(), nullable=True),
        sa.Column("validation_status", sa.String(length=16), nullable=True),
        sa.Column("build_status", sa.String(length=16), nullable=True),
        sa.Column("builder", sa.String(length=16), nullable=True),
        sa.Column("image_ref", sa.String(length=512), nullable=True),
        sa.Column("build_seconds", sa.Float(), nullable=True),
        sa.Column("smoke_status", sa.String(length=16), nullable=True),
        sa.Column("cold_start_s", sa.Float(), nullable=True),
        sa.Column("step_p50_ms", sa.Float(), nullable=True),
        sa.Column("step_p95_ms", sa.Float(), nullable=True),
        sa.Column("failure_stage", sa.String(length=16), nullable=True),
        sa.Column("failure_reason", sa.Text(), nullable=True),
        sa.Column("yanked", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["env_id"], ["environments.id"], name=op.f("fk_env_versions_env_id_environments"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_env_versions")),
        sa.UniqueConstraint("env_id", "sha", name="uq_env_versions_env_sha"),
    )
    with op.batch_alter_table("env_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_env_versions_env_id"), ["env_id"], unique=False)

    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=128), nullable=True),
        sa.Column("created_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["version_id"], ["env_versions.id"], name=op.f("fk_jobs_version_id_env_versions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_state_priority_id", ["state", "priority", "id"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_version_id"), ["version_id"], unique=False)

    op.create_table(
        "stage_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("log", sa.Text(), nullable=False),
        sa.Column("started_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_stage_runs_job_id_jobs"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(
            ["version_id"], ["env_versions.id"], name=op.f("fk_stage_runs_version_id_env_versions"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stage_runs")),
    )
    with op.batch_alter_table("stage_runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_stage_runs_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_stage_runs_version_id"), ["version_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("stage_runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_stage_runs_version_id"))
        batch_op.drop_index(batch_op.f("ix_stage_runs_job_id"))

    op.drop_table("stage_runs")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_version_id"))
        batch_op.drop_index("ix_jobs_state_priority_id")

    op.drop_table("jobs")
    with op.batch_alter_table("env_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_env_versions_env_id"))

    op.drop_table("env_versions")
    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.drop_index("ix_environments_status_name")
        batch_op.drop_index("ix_environments_gone")

    op.drop_table("environments")
