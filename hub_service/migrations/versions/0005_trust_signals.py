"""trust signals: capacity card, determinism, reward sanity per revision; evals and leaderboards

Each checked revision keeps what the smoke stage measured beyond its first figures (`capacity`,
`determinism`, `reward_check`, as JSON); an environment keeps the latest passing revision's
verdicts as plain columns the catalog filters on. `evals` holds scored runs: the random baseline
the pipeline plays, every "let a model try" run on the website, and `openenv eval` submissions.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 01:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("env_versions") as batch:
        batch.add_column(sa.Column("capacity", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("determinism", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("reward_check", sa.JSON(), nullable=True))
    with op.batch_alter_table("environments") as batch:
        batch.add_column(sa.Column("deterministic", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("reward_checked", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("sessions_held", sa.Integer(), nullable=True))
    op.create_table(
        "evals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("env_id", sa.Integer(), nullable=False),
        sa.Column("version_id", sa.Integer(), nullable=True),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("endpoint_host", sa.String(length=255), nullable=True),
        sa.Column("submitted_by", sa.String(length=128), nullable=True),
        sa.Column("episodes", sa.Integer(), nullable=False),
        sa.Column("mean_return", sa.Float(), nullable=False),
        sa.Column("ci_low", sa.Float(), nullable=False),
        sa.Column("ci_high", sa.Float(), nullable=False),
        sa.Column("returns", sa.JSON(), nullable=False),
        sa.Column("created_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["env_id"], ["environments.id"], name=op.f("fk_evals_env_id_environments"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["version_id"], ["env_versions.id"], name=op.f("fk_evals_version_id_env_versions"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evals")),
        sa.CheckConstraint("source IN ('baseline', 'website', 'cli')", name=op.f("ck_evals_source")),
    )
    with op.batch_alter_table("evals", schema=None) as batch_op:
        batch_op.create_index("ix_evals_env_id_mean_return", ["env_id", "mean_return"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("evals", schema=None) as batch_op:
        batch_op.drop_index("ix_evals_env_id_mean_return")
    op.drop_table("evals")
    with op.batch_alter_table("environments") as batch:
        batch.drop_column("sessions_held")
        batch.drop_column("reward_checked")
        batch.drop_column("deterministic")
    with op.batch_alter_table("env_versions") as batch:
        batch.drop_column("reward_check")
        batch.drop_column("determinism")
        batch.drop_column("capacity")
