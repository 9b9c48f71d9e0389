"""Where environments come from: the Hugging Face Hub, or a local folder of Space-shaped envs.

A source lists what exists now (one pass, no per-Space calls) and fetches the files of one
revision. Everything else (what changed, what is gone) is the indexer's business.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import urlencode

from hub_service.errors import SourceError

if TYPE_CHECKING:
    from huggingface_hub.hf_api import ExpandSpaceProperty_T

__all__ = [
    "FetchRefused",
    "HfSource",
    "LocalSource",
    "Page",
    "PagedSource",
    "Source",
    "SourceEnv",
    "card_text",
    "check_tree",
    "folder_sha",
]

_SKIP_DIRS = {
    ".git",
    ".venv",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "node_modules",
    ".openenv-sdk",
}
_EXPAND: list[ExpandSpaceProperty_T] = [
    "sha",
    "tags",
    "likes",
    "private",
    "runtime",
    "subdomain",
    "cardData",
    "lastModified",
    "author",
    "sdk",
]


@dataclass
class SourceEnv:
    """One environment as its source describes it right now."""

    owner: str
    name: str
    sha: str
    tags: list[str] = field(default_factory=list)
    likes: int = 0
    private: bool = False
    stage: str | None = None
    subdomain: str | None = None
    host: str | None = None
    title: str | None = None
    description: str | None = None
    last_modified: dt.datetime | None = None
    location: str | None = None  # a local folder (local source)
    manifest_text: str | None = None  # openenv.yaml's words for text search, when the source can read it cheaply

    @property
    def repo_id(self) -> str:
        return f"{self.owner}/{self.name}"


class Source(Protocol):
    name: str
    trusted: bool

    def list(self) -> Iterator[SourceEnv]:
        """Every environment the source has now."""
        ...

    def fetch(self, owner: str, name: str, sha: str, dest: Path) -> Path:
        """The files of `owner/name` at `sha`, in `dest` (created); returns the folder."""
        ...


@dataclass
class Page:
    """One page of a paged source's listing: its environments, where it was read, and the next page's
    address (None on the last page)."""

    items: list[SourceEnv]
    url: str
    next_url: str | None


@runtime_checkable
class PagedSource(Source, Protocol):
    """A source whose listing comes in pages that a crawl can resume at (the Hugging Face Hub)."""

    def pages(self, resume_url: str | None = None, newest_first: bool = False) -> Iterator[Page]:
        """The listing's pages from the first, or from `resume_url` (a page's `url` or `next_url`);
        `newest_first`: the most recently modified environments first (an incremental pass's order).

        Raises:
            SourceError: the source did not answer; `CrawlPaused` (hf_pages.py) when it asked to
                wait longer than the crawl may.
        """
        ...

    def get(self, owner: str, name: str) -> SourceEnv | None:
        """One environment as the source describes it now; None when it does not list it."""
        ...


def folder_sha(path: Path) -> str:
    """A content hash of an env folder: the local source's notion of a revision."""
    h = hashlib.sha1()
    entries = (p for p in path.rglob("*") if not (_SKIP_DIRS & set(p.relative_to(path).parts)) and p.suffix != ".pyc")
    for entry in sorted(entries):
        if entry.is_symlink():  # a link is part of the revision as a link, never as what it points at
            h.update(f"{entry.relative_to(path)}\0link:{os.readlink(entry)}".encode())
        elif entry.is_file():
            h.update(str(entry.relative_to(path)).encode())
            h.update(b"\0")
            h.update(entry.read_bytes())
    return h.hexdigest()


def card_text(value: Any, limit: int | None = None) -> str | None:
    """`value` as a single line of stored text: strings and numbers as text (NULs dropped, cut to
    `limit` characters), anything else (lists, mappings, booleans, None) as None."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    text = str(value).replace("\x00", "").strip()
    if limit is not None:
        text = text[:limit]
    return text or None


_CARD_BYTES = 256 << 10  # front matter sits at the top of a README; nothing past this is read


def _read_card(readme: Path) -> str:
    """The start of a local env's README: a regular file of the env's own, never what a link
    points at (a symlink could name any file of this machine), never a FIFO or a device (which
    could block the crawl or never end); "" when there is no such file."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(readme, flags)
    except OSError:  # absent, a symlink (ELOOP), unreadable
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(_CARD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _manifest(path: Path) -> dict[str, Any]:
    """A local env's openenv.yaml as data ({} when unreadable, invalid or not a mapping)."""
    import yaml

    from openenv._yaml import load_limited

    try:
        data = load_limited(_read_card(path))
    except (yaml.YAMLError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _front_matter(readme: Path) -> dict[str, Any]:
    text = _read_card(readme)
    if not text.startswith("---"):
        return {}
    end = text.find("\n---", 3)
    if end < 0:
        return {}
    import yaml

    from openenv._yaml import load_limited

    try:
        data = load_limited(text[3:end])
    except (yaml.YAMLError, ValueError):  # invalid or over the limits: no usable front matter
        return {}
    return data if isinstance(data, dict) else {}


def _newest_mtime(folder: Path) -> float:
    """The newest modification time of the folder's regular files (links are not followed)."""
    newest = 0.0
    for path in folder.rglob("*"):
        try:
            info = path.lstat()
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            newest = max(newest, info.st_mtime)
    return newest


class LocalSource:
    """A folder whose subfolders are Space-shaped envs (each has an openenv.yaml)."""

    name = "local"

    def __init__(
        self, root: str | Path, owner: str = "local", trusted: bool = True, max_bytes: int = 512 << 20
    ) -> None:
        self.root = Path(root).resolve()
        self.owner = owner
        self.trusted = trusted
        self.max_bytes = max_bytes

    def list(self) -> Iterator[SourceEnv]:
        from hub_service.catalog.service import manifest_search_text

        if not self.root.is_dir():
            raise SourceError(f"local source {self.root} is not a folder; set OPENENV_HUB_LOCAL_SOURCE")
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir() and (p / "openenv.yaml").is_file()):
            front = _front_matter(folder / "README.md")
            manifest = _manifest(folder / "openenv.yaml")
            raw_tags = front.get("tags")
            tags: list[Any] = raw_tags if isinstance(raw_tags, list) else []
            mtime = _newest_mtime(folder)
            yield SourceEnv(
                owner=self.owner,
                name=folder.name,
                sha=folder_sha(folder),
                tags=[t for t in (card_text(t) for t in tags) if t],
                title=card_text(front.get("title")) or folder.name,
                # the README card's words, else openenv.yaml's (which every env has)
                description=card_text(front.get("short_description"))
                or card_text(front.get("description"))
                or card_text(manifest.get("description")),
                stage="LOCAL",
                last_modified=dt.datetime.fromtimestamp(mtime, dt.UTC),
                location=str(folder),
                manifest_text=manifest_search_text(manifest),
            )

    def fetch(self, owner: str, name: str, sha: str, dest: Path) -> Path:
        folder = self.root / name
        if not folder.is_dir():
            raise SourceError(f"{owner}/{name} is no longer in {self.root}")
        if folder_sha(folder) != sha:
            raise SourceError(f"{owner}/{name} changed since revision {sha[:12]} was indexed; it will be indexed again")
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(folder, dest, symlinks=True, ignore=shutil.ignore_patterns(*_SKIP_DIRS, "*.pyc"))
        check_tree(dest, self.max_bytes)
        return dest


class HfSource:
    """Spaces on a Hugging Face Hub (or a stand-in at HF_ENDPOINT) carrying a tag."""

    name = "hf"
    trusted = False

    def __init__(
        self,
        endpoint: str | None,
        token: str | None,
        tag: str = "openenv",
        max_bytes: int = 512 << 20,
        wait_max_s: float = 300.0,
    ) -> None:
        from huggingface_hub import HfApi

        self.api = HfApi(endpoint=endpoint, token=token)
        self.endpoint = endpoint
        self.token = token
        self.tag = tag
        self.max_bytes = max_bytes
        self.wait_max_s = wait_max_s  # OPENENV_HUB_HF_CRAWL_WAIT_MAX_S: waits one crawl may spend on 429s

    def list(self) -> Iterator[SourceEnv]:
        for page in self.pages():
            yield from page.items

    def pages(self, resume_url: str | None = None, newest_first: bool = False) -> Iterator[Page]:
        from huggingface_hub.hf_api import SpaceInfo
        from huggingface_hub.utils import build_hf_headers

        from hub_service.indexer.hf_pages import WaitBudget, listing_pages

        order = [("sort", "lastModified"), ("direction", "-1")] if newest_first else []
        query = urlencode([("filter", self.tag), *(("expand", e) for e in _EXPAND), *order])
        first = resume_url or f"{self.api.endpoint.rstrip('/')}/api/spaces?{query}"
        headers = build_hf_headers(token=self.token)
        for raw in listing_pages(first, headers, WaitBudget(self.wait_max_s)):
            try:
                infos = [SpaceInfo(**{"siblings": None, **item}) for item in raw.items]
            except (KeyError, TypeError, ValueError) as exc:
                raise SourceError(f"a page of Spaces tagged {self.tag!r} cannot be read: {exc}") from exc
            # the catalog lists public Spaces only (a token may see more)
            items = [self._convert(info) for info in infos if not info.private]
            yield Page(items=items, url=raw.url, next_url=raw.next_url)

    def get(self, owner: str, name: str) -> SourceEnv | None:
        """One Space as the Hub describes it now; None when it is gone, private, or untagged.

        Raises:
            SourceError: the Hub did not answer (try again later).
        """
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            info = self.api.space_info(f"{owner}/{name}", expand=_EXPAND)
        except RepositoryNotFoundError:
            return None
        except Exception as exc:
            raise SourceError(f"reading Space {owner}/{name} failed: {exc}") from exc
        if self.tag not in (info.tags or []) or info.private:
            return None
        return self._convert(info)

    def locate(self, owner: str, name: str) -> str | None:
        """The id of the Space the Hub serves at `owner/name` now (after a move, the Hub may answer
        an old name with the Space's new id), or None when it has none there (or none we may see).

        Raises:
            SourceError: the Hub did not answer (try again later).
        """
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            info = self.api.space_info(f"{owner}/{name}")
        except RepositoryNotFoundError:
            return None
        except Exception as exc:
            raise SourceError(f"reading Space {owner}/{name} failed: {exc}") from exc
        return str(info.id)

    def stages(self) -> Iterator[tuple[str, str, str | None]]:
        """(owner, name, runtime stage) of every tagged Space: one listing, runtime only."""
        try:
            for info in self.api.list_spaces(filter=self.tag, expand=["runtime"]):
                owner, _, name = str(info.id).partition("/")
                runtime = getattr(info, "runtime", None)
                stage = getattr(runtime, "stage", None)
                yield owner, name, str(stage) if stage is not None else None
        except Exception as exc:
            raise SourceError(f"listing the runtime of Spaces tagged {self.tag!r} failed: {exc}") from exc

    def _convert(self, info: Any) -> SourceEnv:
        owner, _, name = str(info.id).partition("/")
        runtime = getattr(info, "runtime", None)
        raw = getattr(runtime, "raw", None) or {}
        card: Any = getattr(info, "card_data", None)
        card_dict: Any = card.to_dict() if hasattr(card, "to_dict") else card
        if not isinstance(card_dict, dict):
            card_dict = {}
        return SourceEnv(
            owner=owner,
            name=name,
            sha=str(info.sha or ""),
            tags=[str(t) for t in (info.tags or [])],
            likes=info.likes if isinstance(info.likes, int) else 0,
            private=bool(info.private),
            stage=str(runtime.stage) if runtime is not None and runtime.stage is not None else None,
            subdomain=info.subdomain,
            host=_space_host(info, raw),
            title=card_text(card_dict.get("title")) or name,
            description=card_text(card_dict.get("short_description")),
            last_modified=info.last_modified,
        )

    def fetch(self, owner: str, name: str, sha: str, dest: Path) -> Path:
        from huggingface_hub import snapshot_download

        if dest.exists():
            shutil.rmtree(dest)
        self._check_listing(owner, name, sha)
        try:
            path = (
                snapshot_download(
                    repo_id=f"{owner}/{name}",
                    repo_type="space",
                    revision=sha,
                    local_dir=dest,
                    endpoint=self.endpoint,
                    token=self.token,
                )
                if _accepts_endpoint()
                else self.api.snapshot_download(
                    repo_id=f"{owner}/{name}", repo_type="space", revision=sha, local_dir=dest
                )
            )
        except Exception as exc:
            raise SourceError(f"fetching {owner}/{name}@{sha[:12]} failed: {exc}") from exc
        cache = Path(path) / ".cache"
        if cache.is_dir():
            shutil.rmtree(cache, ignore_errors=True)
        check_tree(Path(path), self.max_bytes)
        return Path(path)

    def _check_listing(self, owner: str, name: str, sha: str) -> None:
        """Refuse, before downloading anything, a revision that is too big or has unsafe paths."""
        try:
            info = self.api.space_info(f"{owner}/{name}", revision=sha, files_metadata=True)
        except Exception as exc:
            raise SourceError(f"listing the files of {owner}/{name}@{sha[:12]} failed: {exc}") from exc
        total = 0
        for sibling in info.siblings or []:
            path = str(sibling.rfilename)
            if path.startswith(("/", "\\")) or ".." in Path(path).parts or "\\" in path:
                raise FetchRefused(f"{owner}/{name}@{sha[:12]} has a file path that leaves its folder: {path!r}")
            total += int(sibling.size or 0)
        if total > self.max_bytes:
            raise FetchRefused(
                f"{owner}/{name}@{sha[:12]} holds {total >> 20} MB of files, over the Hub's cap of {self.max_bytes >> 20} MB"
            )


class FetchRefused(Exception):
    """The revision's files are not safe or small enough to fetch; the env's fault, not transient."""


def check_tree(root: Path, max_bytes: int) -> None:
    """Drop symlinks that lead out of `root` and refuse trees over `max_bytes`.

    Raises:
        FetchRefused: the files add up to more than `max_bytes`.
    """
    total = 0
    top = root.resolve()
    for path in list(root.rglob("*")):
        if path.is_symlink():
            target = path.resolve()
            if target != top and top not in target.parents:
                path.unlink()  # a link to a file of this machine must not reach a build context
            continue
        if path.is_file():
            total += path.stat().st_size
            if total > max_bytes:
                raise FetchRefused(f"the files add up to more than the Hub's cap of {max_bytes >> 20} MB")


def _accepts_endpoint() -> bool:
    import inspect

    from huggingface_hub import snapshot_download

    return "endpoint" in inspect.signature(snapshot_download).parameters


def _is_loopback(host: str) -> bool:
    """A `host[:port]` on this machine (a Space run by a local Hub, as the tests' stand-in does):
    served over plain HTTP, as the client assumes for such hosts too."""
    name = host.rsplit(":", 1)[0].strip("[]")
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return name == "localhost"


def _space_host(info: Any, runtime_raw: dict[str, Any]) -> str | None:
    """The Space's URL as the Hub reports it: `host`, else a READY runtime domain, else the subdomain."""
    host = getattr(info, "host", None)
    if host:
        return str(host).rstrip("/")
    for domain in runtime_raw.get("domains") or []:
        if isinstance(domain, dict) and domain.get("domain") and domain.get("stage", "READY") == "READY":
            name = str(domain["domain"]).rstrip("/")
            return name if "://" in name else f"{'http' if _is_loopback(name) else 'https'}://{name}"
    if getattr(info, "subdomain", None):
        return f"https://{info.subdomain}.hf.space"
    return None
