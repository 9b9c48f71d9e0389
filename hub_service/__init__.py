"""The Environment Hub service: index, validate, build, smoke-test, catalog and resolve envs.

Build the app with `hub_service.app.create_app(settings)`; run it with `openenv hub serve`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["HubSettings", "create_app", "get_settings"]


def __getattr__(name: str) -> Any:  # keep `import hub_service` cheap: the web stack loads on use
    if name == "create_app":
        from hub_service.app import create_app

        return create_app
    if name in ("HubSettings", "get_settings"):
        from hub_service import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'hub_service' has no attribute {name!r}")
