"""JSON shapes of the stand-in Hub's replies (repo info, trees, discussions), as the real Hub sends them."""

from __future__ import annotations

import hashlib
from typing import Any

import yaml

from tests.support.hf_hub.store import Commit, Discussion, HubStore, Repo

__all__ = ["card_and_tags", "discussion_details", "discussion_summary", "repo_info", "tree_entries", "url_prefix"]

# What GET /api/spaces returns per item when neither `expand` nor `full` is asked for.
_LIST_FIELDS = ("_id", "id", "likes", "trendingScore", "private", "sdk", "tags", "createdAt")
_RUNTIME_FIELDS = ("runtime",)


def url_prefix(repo_type: str) -> str:
    """Web URL prefix of a repo type: "" for models, "spaces/" and "datasets/" otherwise."""
    return {"model": "", "dataset": "datasets/", "space": "spaces/"}[repo_type]


def card_and_tags(store: HubStore, repo: Repo, commit: Commit | None) -> tuple[dict[str, Any] | None, list[str]]:
    """The README front matter at `commit` and the repo's tags (front matter tags, sdk, extras).

    Cached per commit: listing thousands of Spaces must not re-read every README.
    """
    key = (repo.repo_type, repo.id, commit.oid if commit else None, tuple(repo.extra_tags), repo.sdk)
    cache: dict[Any, Any] = store.__dict__.setdefault("_card_cache", {})
    if key in cache:
        return cache[key]
    card: dict[str, Any] | None = None
    entry = commit.tree.get("README.md") if commit else None
    if entry is not None:
        text = store.blob(entry).decode("utf-8", "replace")
        lines = text.splitlines()
        if lines and lines[0].strip() == "---":
            end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
            if end is not None:
                try:
                    loaded = yaml.safe_load("\n".join(lines[1:end]))
                except yaml.YAMLError:
                    loaded = None
                card = loaded if isinstance(loaded, dict) else None
    tags: list[str] = []
    for tag in [*((card or {}).get("tags") or []), repo.sdk, *repo.extra_tags, "region:us"]:
        if isinstance(tag, str) and tag and tag not in tags:
            tags.append(tag)
    cache[key] = (card, tags)
    return card, tags


def repo_info(
    store: HubStore,
    repo: Repo,
    commit: Commit | None,
    *,
    endpoint: str,
    expand: list[str] | None = None,
    full: bool = True,
    blobs: bool = False,
) -> dict[str, Any]:
    """The info document of a repo (GET /api/spaces/{id}), projected like the Hub does.

    `expand` keeps `_id`, `id` and the named properties; otherwise `full` gives everything and
    not-full gives the short list shape.
    """
    card, tags = card_and_tags(store, repo, commit)
    info: dict[str, Any] = {
        "_id": repo.mongo_id,
        "id": repo.id,
        "author": repo.owner,
        "sha": commit.oid if commit else None,
        "lastModified": repo.last_modified,
        "createdAt": repo.created_at,
        "private": repo.private,
        "gated": False,
        "disabled": False,
        "likes": repo.likes,
        "trendingScore": 0,
        "tags": tags,
        "cardData": card,
        "siblings": [
            {"rfilename": path, **({"size": e["size"], "blobId": e["oid"]} if blobs else {})}
            for path, e in sorted((commit.tree if commit else {}).items())
        ],
        "usedStorage": sum(e["size"] for e in (commit.tree if commit else {}).values()),
    }
    if repo.repo_type == "space":
        info.update(
            {
                "sdk": repo.sdk,
                "subdomain": repo.subdomain,
                "host": repo.host or f"https://{repo.subdomain}.hf.space",
                "runtime": dict(repo.runtime),
                "models": [],
                "datasets": [],
                "region": "us",
            }
        )
    if expand:
        return {k: v for k, v in info.items() if k in ("_id", "id") or k in expand}
    if not full:
        return {k: info[k] for k in _LIST_FIELDS if k in info}
    return info


def tree_entries(commit: Commit, path: str, recursive: bool) -> list[dict[str, Any]] | None:
    """Entries under `path` at `commit` (None when the path does not exist)."""
    prefix = path.strip("/")
    if prefix and prefix in commit.tree:
        e = commit.tree[prefix]
        return [{"type": "file", "oid": e["oid"], "size": e["size"], "path": prefix}]
    base = f"{prefix}/" if prefix else ""
    files = {p: e for p, e in commit.tree.items() if p.startswith(base)}
    if prefix and not files:
        return None
    entries: dict[str, dict[str, Any]] = {}
    for p, e in sorted(files.items()):
        rest = p[len(base) :]
        parts = rest.split("/")
        if recursive:
            for depth in range(1, len(parts)):
                folder = base + "/".join(parts[:depth])
                entries.setdefault(folder, _folder(folder, files))
            entries[p] = {"type": "file", "oid": e["oid"], "size": e["size"], "path": p}
        elif len(parts) == 1:
            entries[p] = {"type": "file", "oid": e["oid"], "size": e["size"], "path": p}
        else:
            folder = base + parts[0]
            entries.setdefault(folder, _folder(folder, files))
    return list(entries.values())


def _folder(path: str, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    inner = sorted(e["oid"] for p, e in files.items() if p.startswith(path + "/"))
    return {"type": "directory", "oid": hashlib.sha1("".join(inner).encode()).hexdigest(), "size": 0, "path": path}


def discussion_summary(repo: Repo, d: Discussion) -> dict[str, Any]:
    return {
        "num": d.num,
        "title": d.title,
        "status": d.status,
        "createdAt": d.created_at,
        "isPullRequest": d.is_pull_request,
        "author": {"name": d.author, "type": "user"},
        "repo": {"name": repo.id, "type": repo.repo_type},
        "numComments": sum(1 for e in d.events if e["type"] == "comment"),
        "pinned": False,
        "topReactions": [],
    }


def discussion_details(store: HubStore, repo: Repo, d: Discussion) -> dict[str, Any]:
    out = {**discussion_summary(repo, d), "events": d.events}
    if d.is_pull_request:
        out["changes"] = {
            "base": f"refs/heads/{d.target_branch}",
            **({"mergeCommitId": d.merge_commit} if d.merge_commit else {}),
        }
        out["filesWithConflicts"] = []
        out["diff"] = _diff(store, repo, d)
    return out


def _diff(store: HubStore, repo: Repo, d: Discussion) -> str:
    base, head = repo.head(d.target_branch), repo.head(d.ref or "")
    if base is None or head is None:
        return ""
    lines: list[str] = []
    for path in sorted(set(base.tree) | set(head.tree)):
        old, new = base.tree.get(path), head.tree.get(path)
        if old == new:
            continue
        lines.append(f"diff --git a/{path} b/{path}")
        if old is None:
            lines.append("new file")
        elif new is None:
            lines.append("deleted file")
        else:
            lines.append(f"index {old['oid'][:7]}..{new['oid'][:7]}")
    return "\n".join(lines) + ("\n" if lines else "")
