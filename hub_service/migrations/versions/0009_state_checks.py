"""states and kinds are enums stored by value, with CHECK constraints (issue 20)

Every closed vocabulary the pipeline and the catalog store gets a CHECK constraint listing its
values (the `StrEnum`s of hub_service/catalog/states.py, hub_service/catalog/stage_runs.py and
hub_service/queue/kinds.py). The lists are written out here, not imported: a migration says
what the schema was at its revision.
Every value the earlier revisions ever wrote is in them ("waiting" included, from 0003), so the
rows of a live database satisfy them; an upgrade that finds one that does not fails and names it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 07:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# table -> (constraint name, column, values, whether NULL is allowed); the names are final (`op.f`),
# not run through the metadata's naming convention again.
_CHECKS: dict[str, list[tuple[str, str, tuple[str, ...], bool]]] = {
    "environments": [
        ("ck_environments_status", "status", ("pending", "waiting", "passing", "failing"), False),
        ("ck_environments_source", "source", ("hf", "local"), False),
    ],
    "env_versions": [
        (
            "ck_env_versions_state",
            "state",
            ("queued", "running", "waiting", "passed", "failed", "cancelled"),
            False,
        ),
        ("ck_env_versions_builder", "builder", ("docker", "process"), True),
    ],
    "jobs": [
        ("ck_jobs_state", "state", ("queued", "running", "done", "failed", "cancelled"), False),
        ("ck_jobs_kind", "kind", ("pipeline", "index_repo", "pr_sync", "pr_report"), False),
    ],
    "stage_runs": [
        ("ck_stage_runs_stage", "stage", ("fetch", "validate", "build", "smoke", "publish"), False),
        ("ck_stage_runs_status", "status", ("running", "passed", "failed", "skipped"), False),
    ],
}


def _condition(column: str, values: tuple[str, ...], nullable: bool) -> str:
    check = f"{column} IN ({', '.join(repr(v) for v in values)})"
    return f"{column} IS NULL OR {check}" if nullable else check


def upgrade() -> None:
    conn = op.get_bind()
    for table, checks in _CHECKS.items():
        for _, column, values, nullable in checks:
            bad = conn.execute(
                sa.text(f"SELECT DISTINCT {column} FROM {table} WHERE NOT ({_condition(column, values, nullable)})")
            ).scalars()
            found = sorted(str(v) for v in bad)
            if found:
                raise RuntimeError(
                    f"{table}.{column} holds {', '.join(found)}, outside {', '.join(values)}: "
                    "fix those rows (or extend the vocabulary in a new migration), then upgrade again"
                )
        with op.batch_alter_table(table) as batch:
            for name, column, values, nullable in checks:
                batch.create_check_constraint(op.f(name), _condition(column, values, nullable))


def downgrade() -> None:
    for table, checks in _CHECKS.items():
        with op.batch_alter_table(table) as batch:
            for name, *_ in reversed(checks):
                batch.drop_constraint(op.f(name), type_="check")
