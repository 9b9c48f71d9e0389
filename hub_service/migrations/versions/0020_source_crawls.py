"""paged crawls that resume: `source_crawls` (one per crawl of a paged source, the page it resumes
at) and `crawl_pages` (what each indexed page listed and corrected, kept until the crawl ends) (issue 49)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import hub_service.db

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "source_crawls",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("started_at", hub_service.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("finished_at", hub_service.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("next_url", sa.Text(), nullable=True),
        sa.Column("pages", sa.Integer(), nullable=False),
        sa.Column("stopped", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_source_crawls")),
    )
    op.create_index(op.f("ix_source_crawls_source"), "source_crawls", ["source"])
    op.create_table(
        "crawl_pages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("crawl_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("listed", sa.JSON(), nullable=False),
        sa.Column("corrections", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["crawl_id"], ["source_crawls.id"], name=op.f("fk_crawl_pages_crawl_id_source_crawls"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_crawl_pages")),
    )
    op.create_index(op.f("ix_crawl_pages_crawl_id"), "crawl_pages", ["crawl_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_crawl_pages_crawl_id"), table_name="crawl_pages")
    op.drop_table("crawl_pages")
    op.drop_index(op.f("ix_source_crawls_source"), table_name="source_crawls")
    op.drop_table("source_crawls")
