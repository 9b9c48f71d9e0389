"""Every table of the service, imported in one place (Alembic and tests use it)."""

from __future__ import annotations

__all__ = ["import_all"]


def import_all() -> None:
    import hub_service.audit.models
    import hub_service.catalog.lock_models
    import hub_service.catalog.models
    import hub_service.catalog.stage_runs
    import hub_service.evals.models
    import hub_service.health.models
    import hub_service.indexer.crawl_models
    import hub_service.indexer.drift
    import hub_service.leadership.models
    import hub_service.pipeline.gc_models
    import hub_service.prbot.models
    import hub_service.queue.models
    import hub_service.quota.models
    import hub_service.webhooks.models  # noqa: F401
