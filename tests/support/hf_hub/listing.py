"""The stand-in's repo listing (GET /api/spaces and its kin), built once and kept until a repo changes.

A crawl of 50,000 Spaces asks for 500 pages of 100; building the whole listing for each would make
the stand-in, not the crawler, the thing measured. A listing is kept per query (everything but the
`cursor`) and reader, and rebuilt only when the store's generation moved (store.py: any repo's field
set, save or delete); a rebuild reuses the item of each repo whose own change count did not move,
so a listing after 100 commits costs 100 items, not 50,000.
"""

from __future__ import annotations

import threading
from typing import Any

from tests.support.hf_hub.store import HubStore, Repo, generation
from tests.support.hf_hub.views import card_and_tags, repo_info

__all__ = ["Listings"]

_SORTS = {
    "lastModified": lambda r: r.last_modified,
    "createdAt": lambda r: r.created_at,
    "likes": lambda r: r.likes,
    "trendingScore": lambda r: 0,
}
_KEEP = 64  # listings kept (distinct queries); the oldest goes first


class Listings:
    """Listings of one store, cached per (kind, query without cursor, reader, endpoint)."""

    def __init__(self, store: HubStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._lists: dict[tuple[Any, ...], tuple[int, list[dict[str, Any]]]] = {}
        # (repo type, repo id, expand, full, endpoint) -> (repo's change count, its item, its tags)
        self._items: dict[tuple[Any, ...], tuple[int, dict[str, Any], list[str]]] = {}

    def listing(
        self,
        repo_type: str,
        params: list[tuple[str, str]],
        reader: tuple[str, tuple[str, ...]] | None,
        endpoint: str,
    ) -> list[dict[str, Any]]:
        """Every item the query lists (filter, search, author, expand, full, sort, direction), as
        `reader` (name, orgs; None when anonymous) may see it; the caller pages it."""
        key = (repo_type, tuple(sorted(params)), reader, endpoint)
        with self._lock:
            now = generation()
            kept = self._lists.get(key)
            if kept is not None and kept[0] == now:
                return kept[1]
            built = self._build(repo_type, params, reader, endpoint)
            self._lists.pop(key, None)
            self._lists[key] = (now, built)
            while len(self._lists) > _KEEP:
                self._lists.pop(next(iter(self._lists)))
            return built

    def _build(
        self, repo_type: str, params: list[tuple[str, str]], reader: tuple[str, tuple[str, ...]] | None, endpoint: str
    ) -> list[dict[str, Any]]:
        q: dict[str, list[str]] = {}
        for k, v in params:
            q.setdefault(k, []).append(v)
        filters = q.get("filter", [])
        search = (q.get("search", [""])[0] or "").lower()
        author = q.get("author", [None])[0]
        expand = tuple(q.get("expand") or q.get("expand[]") or ())
        full = q.get("full", [""])[0] in ("1", "true", "True")
        with self.store.lock:
            repos = [r for (t, _), r in self.store.repos.items() if t == repo_type]
        listed: list[tuple[Repo, dict[str, Any]]] = []
        for repo in repos:
            if repo.private and (reader is None or not (reader[0] == repo.owner or repo.owner in reader[1])):
                continue
            if author and repo.owner != author:
                continue
            if search and search not in repo.id.lower():
                continue
            item, tags = self._item(repo, expand, full, endpoint)
            if filters and not all(f in tags for f in filters):
                continue
            listed.append((repo, item))
        sort = q.get("sort", [None])[0]
        if sort in _SORTS:
            by = _SORTS[sort]
            listed.sort(key=lambda pair: by(pair[0]), reverse=q.get("direction", [None])[0] != "1")
        return [item for _, item in listed]

    def _item(self, repo: Repo, expand: tuple[str, ...], full: bool, endpoint: str) -> tuple[dict[str, Any], list[str]]:
        key = (repo.repo_type, repo.id, expand, full, endpoint)
        changes = repo.__dict__.get("changes", 0)
        kept = self._items.get(key)
        if kept is not None and kept[0] == changes:
            return kept[1], kept[2]
        head = repo.head()
        _, tags = card_and_tags(self.store, repo, head)
        item = repo_info(self.store, repo, head, endpoint=endpoint, expand=list(expand) or None, full=full)
        self._items[key] = (changes, item, tags)
        return item, tags
