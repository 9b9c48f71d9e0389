"""Issue 49: a catalog page is read from an index in its sort's order (the database stops after the
page, whatever the catalog's size), and the totals a listing reports follow the catalog's changes."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog import service
from hub_service.catalog.models import EnvRecord


def _envs(factory: sessionmaker[Session], first: int, count: int) -> None:
    with factory.begin() as s:
        s.add_all(
            EnvRecord(
                source="hf",
                owner=f"org{i % 7}",
                name=f"env_{i:05d}",
                likes=i % 50,
                search_text=f"env_{i:05d} {'a chess puzzle' if i % 10 == 0 else 'a grid world'} #openenv "
                f"#{('games', 'coding')[i % 2]} ",
            )
            for i in range(first, first + count)
        )


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_pages_are_read_in_index_order_and_totals_follow_the_catalog(
    engine: Engine, clean_factory: sessionmaker[Session]
) -> None:
    _envs(clean_factory, 0, 300)
    pages: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if statement.lstrip().startswith("SELECT environments.id"):
            pages.append((statement, params))

    event.listen(engine, "before_cursor_execute", keep)
    try:
        with clean_factory() as s:
            for sort in ("name", "-name", "likes", "-likes", "updated", "-updated"):
                envs, cursor, _ = service.list_envs(s, service.ListQuery(sort=sort, limit=20))
                assert len(envs) == 20 and cursor
                service.list_envs(s, service.ListQuery(sort=sort, limit=20, cursor=cursor))
            service.list_envs(s, service.ListQuery(tags=["games"], sort="-likes", limit=20))
    finally:
        event.remove(engine, "before_cursor_execute", keep)
    assert len(pages) == 13
    with engine.connect() as conn:
        for statement, params in pages:
            plan = " / ".join(row[-1] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params))
            # No sort of every matching row before the page: the rows come in the index's order.
            assert "TEMP B-TREE" not in plan, (statement[-200:], params, plan)

    with clean_factory() as s:
        assert service.list_envs(s, service.ListQuery(limit=5))[2] == 300
        assert service.list_envs(s, service.ListQuery(q="chess", limit=5))[2] == 30
        assert service.list_envs(s, service.ListQuery(tags=["games"], limit=5))[2] == 150
    _envs(clean_factory, 300, 10)  # a crawl adds ten: every total counts them at once
    with clean_factory.begin() as s:
        s.execute(text("UPDATE environments SET gone = true WHERE name = 'env_00000'"))
    with clean_factory.begin() as s:
        s.get(EnvRecord, 2).gone = True  # type: ignore[union-attr]
    with clean_factory() as s:
        assert service.list_envs(s, service.ListQuery(limit=5))[2] == 308
        assert service.list_envs(s, service.ListQuery(q="chess", limit=5))[2] == 30
        assert service.list_envs(s, service.ListQuery(tags=["games"], limit=5))[2] == 154
