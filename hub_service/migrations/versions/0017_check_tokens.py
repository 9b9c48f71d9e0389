"""RFC 008 check filters: the catalog filters on the check ids of each env's current report

`environments.manifest_text` gains a `chk:<check id>:<status> ` token per result of the current
revision's `rfc008` report (hub_service.catalog.discovery.checks_search_text), which the catalog's
`check=` filter matches; existing rows get theirs from the report their current revision kept.
No schema change: downgrading drops the tokens.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 23:30:00
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_TOKEN = re.compile(r"chk:\S+ ")


def _tokens(report: Any) -> str:
    # Frozen copy of hub_service.catalog.discovery.checks_search_text as of this revision.
    results = report.get("results") if isinstance(report, dict) else None
    return "".join(
        f"chk:{r['check_id']}:{r['status']} "
        for r in (results if isinstance(results, list) else [])
        if isinstance(r, dict) and isinstance(r.get("check_id"), str) and isinstance(r.get("status"), str)
    )


_ENVS = sa.table(
    "environments",
    sa.column("id", sa.Integer),
    sa.column("latest_version_id", sa.Integer),
    sa.column("manifest_text", sa.Text),
)
_VERSIONS = sa.table("env_versions", sa.column("id", sa.Integer), sa.column("rfc008", sa.JSON))


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(_ENVS.c.id, _ENVS.c.manifest_text, _VERSIONS.c.rfc008).join(
            _VERSIONS, _VERSIONS.c.id == _ENVS.c.latest_version_id
        )
    ).all()
    for env_id, text, report in rows:
        tokens = _tokens(report)
        if tokens:
            kept = _TOKEN.sub("", text or "")
            conn.execute(_ENVS.update().where(_ENVS.c.id == env_id).values(manifest_text=f"{kept.rstrip()} {tokens}"))


def downgrade() -> None:
    conn = op.get_bind()
    for env_id, text in conn.execute(sa.select(_ENVS.c.id, _ENVS.c.manifest_text)).all():
        if text and "chk:" in text:
            conn.execute(_ENVS.update().where(_ENVS.c.id == env_id).values(manifest_text=_TOKEN.sub("", text)))
