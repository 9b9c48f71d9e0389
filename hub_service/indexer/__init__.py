"""The indexer: lists a source's environments and queues their new revisions."""

from __future__ import annotations

from hub_service.indexer.lookup import source_for

__all__ = ["source_for"]
