"""live index: webhooks, pull-request checks, audit trail, health, maintainer fields

Jobs become general (a `kind` other than "pipeline" has no version; its arguments are in
`payload`); environments get health and deprecation columns; versions a yank reason.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 23:40:43.776902
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("received_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("scope", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("repo_type", sa.String(length=16), nullable=False),
        sa.Column("repo", sa.String(length=200), nullable=False),
        sa.Column("head_sha", sa.String(length=64), nullable=True),
        sa.Column("discussion_num", sa.Integer(), nullable=True),
        sa.Column("webhook_id", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("job_ids", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint("key", name=op.f("uq_webhook_deliveries_key")),
    )
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_webhook_deliveries_repo"), ["repo"], unique=False)

    op.create_table(
        "env_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=True),
        sa.Column("sha", sa.String(length=64), nullable=True),
        sa.Column("ref", sa.String(length=128), nullable=True),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("created_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["env_id"], ["environments.id"], name=op.f("fk_env_events_env_id_environments"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_env_events")),
    )
    with op.batch_alter_table("env_events", schema=None) as batch_op:
        batch_op.create_index("ix_env_events_env_id_id", ["env_id", "id"], unique=False)

    op.create_table(
        "health_transitions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.Integer(), nullable=False),
        sa.Column("health", sa.String(length=16), nullable=False),
        sa.Column("previous", sa.String(length=16), nullable=True),
        sa.Column("stage", sa.String(length=32), nullable=True),
        sa.Column("at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["env_id"], ["environments.id"], name=op.f("fk_health_transitions_env_id_environments"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_health_transitions")),
    )
    with op.batch_alter_table("health_transitions", schema=None) as batch_op:
        batch_op.create_index("ix_health_transitions_env_id_at", ["env_id", "at"], unique=False)

    op.create_table(
        "pr_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.Integer(), nullable=False),
        sa.Column("num", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=True),
        sa.Column("head_sha", sa.String(length=64), nullable=True),
        sa.Column("version_id", sa.Integer(), nullable=True),
        sa.Column("comment_id", sa.String(length=64), nullable=True),
        sa.Column("reported", sa.String(length=128), nullable=True),
        sa.Column("lease_by", sa.String(length=128), nullable=True),
        sa.Column("lease_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("created_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("updated_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["env_id"], ["environments.id"], name=op.f("fk_pr_checks_env_id_environments"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["version_id"], ["env_versions.id"], name=op.f("fk_pr_checks_version_id_env_versions"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pr_checks")),
        sa.UniqueConstraint("env_id", "num", name="uq_pr_checks_env_num"),
    )
    with op.batch_alter_table("pr_checks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pr_checks_env_id"), ["env_id"], unique=False)

    with op.batch_alter_table("env_versions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("yank_reason", sa.Text(), nullable=True))

    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.add_column(sa.Column("health", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("health_since", hub_service.db.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("health_checked_at", hub_service.db.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("deprecated", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column("deprecation_reason", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("successor", sa.String(length=200), nullable=True))

    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("payload", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("subject", sa.String(length=300), nullable=True))
        batch_op.add_column(sa.Column("run_after", hub_service.db.UTCDateTime(timezone=True), nullable=True))
        batch_op.alter_column("version_id", existing_type=sa.INTEGER(), nullable=True)
        batch_op.create_index("ix_jobs_subject_state", ["subject", "state"], unique=False)


def downgrade() -> None:
    # Jobs without a version (tasks) cannot exist in the old schema.
    op.execute("DELETE FROM jobs WHERE version_id IS NULL")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index("ix_jobs_subject_state")
        batch_op.alter_column("version_id", existing_type=sa.INTEGER(), nullable=False)
        batch_op.drop_column("run_after")
        batch_op.drop_column("subject")
        batch_op.drop_column("payload")

    with op.batch_alter_table("environments", schema=None) as batch_op:
        batch_op.drop_column("successor")
        batch_op.drop_column("deprecation_reason")
        batch_op.drop_column("deprecated")
        batch_op.drop_column("health_checked_at")
        batch_op.drop_column("health_since")
        batch_op.drop_column("health")

    with op.batch_alter_table("env_versions", schema=None) as batch_op:
        batch_op.drop_column("yank_reason")

    with op.batch_alter_table("pr_checks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pr_checks_env_id"))

    op.drop_table("pr_checks")
    with op.batch_alter_table("health_transitions", schema=None) as batch_op:
        batch_op.drop_index("ix_health_transitions_env_id_at")

    op.drop_table("health_transitions")
    with op.batch_alter_table("env_events", schema=None) as batch_op:
        batch_op.drop_index("ix_env_events_env_id_id")

    op.drop_table("env_events")
    with op.batch_alter_table("webhook_deliveries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhook_deliveries_repo"))

    op.drop_table("webhook_deliveries")
