"""The routers that keep the catalog live and accountable (issue 7): webhooks, the audit trail,
runtime health, pull-request checks, maintainer actions, and the lock files whose images are kept."""

from __future__ import annotations

from fastapi import APIRouter

__all__ = ["routers"]


def routers() -> list[APIRouter]:
    from hub_service.audit.routes import router as audit
    from hub_service.health.routes import router as health
    from hub_service.locks.routes import router as locks
    from hub_service.maintainers.routes import router as maintainers
    from hub_service.prbot.routes import router as pulls
    from hub_service.webhooks.routes import router as webhooks

    return [webhooks, audit, health, pulls, maintainers, locks]
