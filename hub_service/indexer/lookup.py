"""`source_for`: the one place that turns a source kind ("hf", "local") into a `Source`."""

from __future__ import annotations

from hub_service.catalog.states import SourceKind
from hub_service.errors import SourceError
from hub_service.indexer.sources import HfSource, LocalSource, Source
from hub_service.settings import HubSettings

__all__ = ["source_for"]


def source_for(settings: HubSettings, kind: str) -> Source:
    """The source of `kind` as the settings configure it.

    Raises:
        SourceError: the local source is not configured, or `kind` is not a source.
    """
    if kind == SourceKind.LOCAL:
        if not settings.local_source:
            raise SourceError("no local source is configured (OPENENV_HUB_LOCAL_SOURCE)")
        return LocalSource(
            settings.local_source,
            owner=settings.local_owner,
            trusted=settings.local_trusted,
            max_bytes=settings.fetch_max_mb << 20,
        )
    if kind == SourceKind.HF:
        token = settings.hf_token.get_secret_value() if settings.hf_token else None
        return HfSource(
            settings.hf_endpoint,
            token,
            tag=settings.hf_tag,
            max_bytes=settings.fetch_max_mb << 20,
            wait_max_s=settings.hf_crawl_wait_max_s,
        )
    raise SourceError(f"unknown source {kind!r}; the sources are {', '.join(SourceKind)}")
