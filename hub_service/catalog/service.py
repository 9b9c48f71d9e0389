"""Catalog queries: search and page through environments, look one up, resolve it."""

from __future__ import annotations

import base64
import datetime as dt
import difflib
import json
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.orm import Session

from hub_service.catalog import pins
from hub_service.catalog.discovery import checks_search_text, discovery_search_text, validation_search_text
from hub_service.catalog.models import STATUSES, EnvRecord, EnvVersion
from hub_service.catalog.schemas import EnvSummary, ResolveRecord, VersionSummary
from hub_service.catalog.stage_runs import StageRun
from hub_service.catalog.states import EnvStatus, VersionState
from hub_service.errors import Conflict, InvalidRequest, NotFound
from hub_service.settings import HubSettings
from openenv.client._hub_service import sessions_held
from openenv.interop.provenance import read_provenance

__all__ = [
    "CHECK_BADGES",
    "SORTS",
    "ListQuery",
    "all_tags",
    "apply_verdict",
    "badges",
    "checks_passed",
    "env_versions",
    "get_env",
    "get_version",
    "imported_from",
    "latest_of",
    "list_envs",
    "manifest_search_text",
    "parse_flag",
    "resolve",
    "reward_verdict",
    "stage_runs",
    "summary",
    "version_summary",
]

_HUGE = 1e12
_REVISION = re.compile(r"^[0-9a-fA-F]{7,64}$")
# sort name -> (column expression, descending?)
SORTS: dict[str, tuple[Any, bool]] = {
    "name": (EnvRecord.name, False),
    "-name": (EnvRecord.name, True),
    "likes": (EnvRecord.likes, False),
    "-likes": (EnvRecord.likes, True),
    "updated": (EnvRecord.updated_at, False),
    "-updated": (EnvRecord.updated_at, True),
    "cold_start": (func.coalesce(EnvRecord.cold_start_s, _HUGE), False),
    "step_latency": (func.coalesce(EnvRecord.step_p50_ms, _HUGE), False),
    # most concurrent sessions one server held in the smoke stage's ramp first; unmeasured last
    "-sessions": (func.coalesce(EnvRecord.sessions_held, -1), True),
}


@dataclass
class ListQuery:
    q: str | None = None
    tags: list[str] = field(default_factory=list)
    status: str | None = None
    source: str | None = None
    sort: str = "name"
    limit: int = 50
    cursor: str | None = None
    include_gone: bool = False
    # the manifest's validation: parts (tokens in manifest_text)
    capabilities: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    # RFC 008 checks of the Hub's report: "ID" (passed) or "ID:STATUS" (pass, fail, skip, error)
    checks: list[str] = field(default_factory=list)
    # trust signals (None: either way); min_sessions: sessions held by one server >= this
    deterministic: bool | None = None
    reward_checked: bool | None = None
    min_sessions: int | None = None

    offset: int = 0  # rows skipped before the page (bounded: deeper pages are reached by cursor)

    def check(self, bounds: HubSettings) -> None:
        """Refuse, before any query runs, a request past one of the listing's bounds (`bounds`'s
        page_size_max, list_offset_max, search_max_chars, search_max_words, filter_max_values and
        filter_max_chars) or with unknown words.

        Raises:
            InvalidRequest: what is wrong, the bound's setting when it is one, and what to do instead.
        """
        if self.sort not in SORTS:
            raise InvalidRequest(f"unknown sort {self.sort!r}; use one of {', '.join(SORTS)}")
        if self.status is not None and self.status not in STATUSES:
            raise InvalidRequest(f"unknown status {self.status!r}; use one of {', '.join(STATUSES)}")
        if self.limit < 1:
            raise InvalidRequest("limit must be 1 or more", parameter="limit")
        _bound("limit", self.limit, bounds, "page_size_max", "ask for fewer and follow next_cursor to the next page")
        if self.offset < 0:
            raise InvalidRequest("offset must be 0 or more", parameter="offset")
        if self.offset and self.cursor:
            raise InvalidRequest("give offset or cursor, not both: next_cursor goes on from a page", parameter="offset")
        _bound("offset", self.offset, bounds, "list_offset_max", "page deeper by following next_cursor")
        if self.q:
            then = "search with fewer, more telling words, and narrow with tag, status or source"
            _bound("q", len(self.q), bounds, "search_max_chars", then, unit="characters")
            _bound("q", len(self.q.split()), bounds, "search_max_words", then, unit="words")
        for parameter, values in (
            ("tag", self.tags),
            ("capability", self.capabilities),
            ("task", self.tasks),
            ("check", self.checks),
        ):
            then = f"ask for fewer {parameter} values (an env must match all of them) and search with q"
            _bound(parameter, len(values), bounds, "filter_max_values", then, unit="values")
            for value in values:
                _bound(
                    parameter, len(value), bounds, "filter_max_chars", "no stored value is longer", unit="characters"
                )
        if self.min_sessions is not None and not 0 <= self.min_sessions < _MAX_CURSOR_INT:
            raise InvalidRequest("min_sessions must be a whole number of sessions, 0 or more")
        for wanted in self.checks:
            check_filter(wanted)


def _bound(parameter: str, value: int, bounds: HubSettings, setting: str, then: str, *, unit: str = "") -> None:
    """Refuse `value` of `parameter` when it is past the bound `bounds.<setting>`.

    Raises:
        InvalidRequest: naming the parameter, the bound, its setting, and `then` (what to do).
    """
    limit = getattr(bounds, setting)
    if value <= limit:
        return
    env_name = f"OPENENV_HUB_{setting.upper()}"
    said = f"{parameter} has {value} {unit}, over" if unit else f"{parameter} {value} is over"
    raise InvalidRequest(
        f"{said} this Hub's limit of {limit}{' ' + unit if unit else ''} ({env_name}): {then}",
        parameter=parameter,
        limit=limit,
        setting=env_name,
    )


_CHECK_STATUSES = ("pass", "fail", "skip", "error")


def check_filter(wanted: str) -> tuple[str, str]:
    """(check id, status) of a `check` filter: `ID` (it passed) or `ID:STATUS`.

    Raises:
        InvalidRequest: not an RFC 008 check id of the Hub's policy, or not one of its statuses.
    """
    from openenv.validation.rfc008 import load_policy

    check_id, _, status = wanted.strip().partition(":")
    known = load_policy().entries
    if check_id not in known:
        near = difflib.get_close_matches(check_id, list(known), n=1)
        hint = f"did you mean {near[0]}?" if near else "docs/validate.md lists the 46 check ids"
        raise InvalidRequest(f"check {check_id[:80]!r} is not an RFC 008 check id: {hint}")
    status = status or "pass"
    if status not in _CHECK_STATUSES:
        raise InvalidRequest(f"check {check_id}: status {status[:20]!r} is not one of {', '.join(_CHECK_STATUSES)}")
    return check_id, status


def parse_flag(name: str, value: str | None) -> bool | None:
    """A `true` / `false` query parameter as a bool (None when absent or empty).

    Raises:
        InvalidRequest: any other value.
    """
    if value is None or value == "":
        return None
    lowered = value.strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    raise InvalidRequest(f"{name} must be true or false, not {value[:40]!r}")


def _filters(query: ListQuery) -> list[ColumnElement[bool]]:
    conds: list[ColumnElement[bool]] = []
    if not query.include_gone:
        conds.append(EnvRecord.gone.is_(False))
    if query.q:
        for word in query.q.lower().split():  # as many as ListQuery.check lets through
            pattern = f"%{_like_escape(word)}%"
            conds.append(
                or_(
                    EnvRecord.search_text.like(pattern, escape="\\"), EnvRecord.manifest_text.like(pattern, escape="\\")
                )
            )
    for tag in query.tags:
        # tags are also in search_text (and manifest_text) as "#tag " tokens, which works on every backend
        pattern = f"%#{_like_escape(tag.lower())} %"
        conds.append(
            or_(EnvRecord.search_text.like(pattern, escape="\\"), EnvRecord.manifest_text.like(pattern, escape="\\"))
        )
    for prefix, names in (("cap", query.capabilities), ("task", query.tasks)):
        for name in names:
            token = "_".join(name.lower().split())[:64]
            conds.append(EnvRecord.manifest_text.like(f"%{prefix}:{_like_escape(token)} %", escape="\\"))
    for wanted in query.checks:
        check_id, status = check_filter(wanted)
        conds.append(EnvRecord.manifest_text.like(f"%chk:{_like_escape(check_id)}:{status} %", escape="\\"))
    if query.status:
        conds.append(EnvRecord.status == query.status)
    if query.source:
        conds.append(EnvRecord.source == query.source)
    # false means checked and found wanting; envs never checked (NULL) match neither value
    if query.deterministic is not None:
        conds.append(EnvRecord.deterministic.is_(query.deterministic))
    if query.reward_checked is not None:
        conds.append(EnvRecord.reward_checked.is_(query.reward_checked))
    if query.min_sessions is not None:
        conds.append(EnvRecord.sessions_held >= query.min_sessions)
    return conds


def _encode_cursor(value: Any, row_id: int) -> str:
    if hasattr(value, "isoformat"):
        value = {"t": value.isoformat()}
    raw = json.dumps([value, row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _like_escape(text: str) -> str:
    """`text` matched literally by LIKE ... ESCAPE '\\': its wildcards and escapes escaped."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_BAD_CURSOR = "the cursor is not one this API gave out for this sort; start again without it"
_MAX_CURSOR_INT = 2**53  # ids and counts are far below this; larger numbers no database column holds


def _cursor_value(value: Any, sort: str) -> Any:
    """The cursor's sort value if it has the type of the sort's column, else None."""
    kind = sort.lstrip("-")
    if kind == "name":
        return value if isinstance(value, str) and "\x00" not in value else None
    if kind == "updated":
        if not (isinstance(value, dict) and isinstance(value.get("t"), str)):
            return None
        try:
            return dt.datetime.fromisoformat(value["t"])
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if kind in ("likes", "sessions"):
        return value if isinstance(value, int) and abs(value) < _MAX_CURSOR_INT else None
    return float(value) if math.isfinite(value) else None  # cold_start, step_latency


def _decode_cursor(cursor: str, sort: str) -> tuple[Any, int]:
    """The (sort value, row id) a cursor of `sort` carries.

    Raises:
        InvalidRequest: the cursor was not made by this API for this sort (forged, cut, or reused
            with another sort).
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        decoded = json.loads(raw)
    except (ValueError, TypeError) as exc:  # not base64, not UTF-8, not JSON
        raise InvalidRequest(_BAD_CURSOR) from exc
    if not (isinstance(decoded, list) and len(decoded) == 2):
        raise InvalidRequest(_BAD_CURSOR)
    value, row_id = _cursor_value(decoded[0], sort), decoded[1]
    if value is None or isinstance(row_id, bool) or not isinstance(row_id, int) or not 0 <= row_id < _MAX_CURSOR_INT:
        raise InvalidRequest(_BAD_CURSOR)
    return value, row_id


def list_envs(session: Session, query: ListQuery) -> tuple[list[EnvRecord], str | None, int]:
    """One page of environments matching `query` (checked by `ListQuery.check`), the cursor of the
    next page, and the total.

    Raises:
        InvalidRequest: the cursor is not one this API made for the sort, or the offset is past the
            last match.
    """
    column, desc = SORTS[query.sort]
    conds = _filters(query)
    total = _count(session, query, conds)
    if query.offset and query.offset >= total:
        raise InvalidRequest(
            f"offset {query.offset} is past the end: {total} environments match, so the last page starts below "
            f"{total}; ask for a smaller offset, or follow next_cursor",
            parameter="offset",
            limit=total,
        )
    page_conds = list(conds)
    if query.cursor:
        value, last_id = _decode_cursor(query.cursor, query.sort)
        if desc:
            page_conds.append(or_(column < value, and_(column == value, EnvRecord.id < last_id)))
        else:
            page_conds.append(or_(column > value, and_(column == value, EnvRecord.id > last_id)))
    order = [column.desc(), EnvRecord.id.desc()] if desc else [column.asc(), EnvRecord.id.asc()]
    sort_value = column.label("sort_value")
    rows = session.execute(
        select(EnvRecord, sort_value).where(*page_conds).order_by(*order).offset(query.offset).limit(query.limit + 1)
    ).all()
    envs = [r[0] for r in rows[: query.limit]]
    next_cursor = None
    if len(rows) > query.limit:
        last_env, last_value = rows[query.limit - 1]
        next_cursor = _encode_cursor(last_value, last_env.id)
    return envs, next_cursor, total


# Totals of recent filters: (where, what the catalog's change marker was, the total, when counted).
# A search or tag filter has no index to count by (its words are matched anywhere in the text), so
# counting one costs a pass over the table: a total is counted again when the catalog changed (a
# row added or updated moves the marker), and at least every _COUNT_FOR_S anyway.
_COUNTS: dict[tuple[Any, ...], tuple[tuple[Any, ...], int, float]] = {}
_COUNT_FOR_S = 2.0
_COUNTS_KEPT = 1024


def _count(session: Session, query: ListQuery, conds: list[ColumnElement[bool]]) -> int:
    """How many envs match `conds` (the filters of `query`), from the totals of recent filters when
    the catalog has not changed since."""
    key = (
        str(session.get_bind().engine.url),
        query.q,
        tuple(query.tags),
        tuple(query.capabilities),
        tuple(query.tasks),
        tuple(query.checks),
        query.status,
        query.source,
        query.include_gone,
        query.deterministic,
        query.reward_checked,
        query.min_sessions,
    )
    # Each part is read from an index's end: the latest update among listed and among gone envs, the newest row.
    latest = [
        select(func.max(EnvRecord.updated_at)).where(EnvRecord.gone.is_(gone)).scalar_subquery()
        for gone in (False, True)
    ]
    marker = tuple(session.execute(select(*latest, select(func.max(EnvRecord.id)).scalar_subquery())).one())
    now = time.monotonic()
    kept = _COUNTS.get(key)
    if kept is not None and kept[0] == marker and now - kept[2] < _COUNT_FOR_S:
        return kept[1]
    total = session.scalar(select(func.count()).select_from(EnvRecord).where(*conds)) or 0
    if len(_COUNTS) >= _COUNTS_KEPT:
        _COUNTS.clear()
    _COUNTS[key] = (marker, total, now)
    return total


def get_env(session: Session, owner: str, name: str) -> EnvRecord:
    """The environment `owner/name`.

    Raises:
        NotFound: no such environment; the message suggests close names.
    """
    env = session.scalar(select(EnvRecord).where(EnvRecord.owner == owner, EnvRecord.name == name))
    if env is not None:
        return env
    wanted = f"{owner}/{name}"
    names = [
        f"{o}/{n}" for o, n in session.execute(select(EnvRecord.owner, EnvRecord.name).where(EnvRecord.gone.is_(False)))
    ]
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(close)}?" if close else "; search with GET /api/v1/envs?q=..."
    raise NotFound(f"no environment {wanted}{hint}", suggestions=close)


def get_version(session: Session, env: EnvRecord, revision: str | None) -> EnvVersion:
    """A version of `env`: by sha (or unique sha prefix of 7+ characters), else the latest on main.

    Raises:
        NotFound: no such revision (or nothing indexed yet).
    """
    if revision:
        if not _REVISION.match(revision):
            raise InvalidRequest("give a revision as a full sha or a prefix of at least 7 of its hex digits (0-9, a-f)")
        revision = revision.lower()
        found = session.scalars(
            select(EnvVersion)
            .where(EnvVersion.env_id == env.id, EnvVersion.sha.startswith(revision, autoescape=True))
            .limit(2)
        ).all()
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise InvalidRequest(f"revision {revision!r} is ambiguous; give more characters")
        raise NotFound(f"{env.repo_id} has no indexed revision {revision}")
    version = None
    if env.latest_version_id is not None:
        version = session.get(EnvVersion, env.latest_version_id)
    if version is None:
        version = session.scalar(
            select(EnvVersion)
            .where(EnvVersion.env_id == env.id, EnvVersion.ref == "main")
            .order_by(EnvVersion.id.desc())
            .limit(1)
        )
    if version is None:
        raise NotFound(f"{env.repo_id} has no indexed revision yet; it is queued for the pipeline")
    return version


def env_versions(session: Session, env: EnvRecord, limit: int = 50) -> list[EnvVersion]:
    """The env's newest `limit` versions, newest first."""
    stmt = select(EnvVersion).where(EnvVersion.env_id == env.id).order_by(EnvVersion.id.desc()).limit(limit)
    return list(session.scalars(stmt).all())


def latest_of(env: EnvRecord, versions: list[EnvVersion]) -> EnvVersion | None:
    """The version the env's page shows: its current verdict's, else the newest."""
    return next((v for v in versions if v.id == env.latest_version_id), versions[0] if versions else None)


def stage_runs(session: Session, version: EnvVersion) -> list[StageRun]:
    """Every stage run of `version` (all attempts), in the order they ran."""
    return list(session.scalars(select(StageRun).where(StageRun.version_id == version.id).order_by(StageRun.id)).all())


def all_tags(session: Session, limit: int = 200) -> list[str]:
    """The tags of listed environments, most used first (for filters)."""
    counts: dict[str, int] = {}
    for tags in session.scalars(select(EnvRecord.tags).where(EnvRecord.gone.is_(False))):
        for tag in tags or []:
            counts[tag] = counts.get(tag, 0) + 1
    return sorted(counts, key=lambda t: (-counts[t], t))[:limit]


def apply_verdict(env: EnvRecord, version: EnvVersion) -> None:
    """Make a finished main-branch version the env's current one: status and figures follow it."""
    if version.ref != "main" or version.state not in (VersionState.PASSED, VersionState.FAILED):
        return
    env.latest_version_id = version.id
    env.status = EnvStatus.PASSING if version.state == VersionState.PASSED else EnvStatus.FAILING
    if isinstance(version.manifest, dict) or version.discovery or version.rfc008:
        texts = (
            manifest_search_text(version.manifest),
            discovery_search_text(version.discovery),
            validation_search_text(version.manifest),
            checks_search_text(version.rfc008),
        )
        env.manifest_text = " ".join(t for t in texts if t) + " "  # every token ends in a space
    env.cold_start_s = version.cold_start_s
    env.step_p50_ms = version.step_p50_ms
    env.deterministic = _verdict(version.determinism, "deterministic")
    env.reward_checked = _verdict({"verdict": reward_verdict(version.reward_check)}, "ok")
    fork = (version.determinism or {}).get("fork")  # the fork check (pipeline/trust_fork.py)
    env.forkable = (
        None if not isinstance(fork, dict) or fork.get("verdict") == "not_offered" else _verdict(fork, "forkable")
    )
    card = version.capacity or {}
    # A capacity is one session or more (the rule clients size pools by); a server whose sessions
    # leak holds that many only until the leak fills it: no capacity to list.
    env.sessions_held = sessions_held(card) if not card.get("flags") else None


def imported_from(manifest: Any) -> dict[str, str | None] | None:
    """Where an env written by `openenv import` came from, as its manifest says (None: not imported)."""
    found = read_provenance(manifest if isinstance(manifest, dict) else None)
    return found.as_dict() if found else None


def manifest_search_text(manifest: Any) -> str:
    """What text search matches in an openenv.yaml: its description, and its tags as `#tag ` tokens."""
    if not isinstance(manifest, dict):
        return ""
    description = manifest.get("description")
    tags = manifest.get("tags")
    words = description.lower()[:4000] if isinstance(description, str) else ""
    tokens = "".join(
        f"#{t.lower()[:64]} " for t in (tags if isinstance(tags, list) else [])[:64] if isinstance(t, str) and t.strip()
    )
    return f"{words} {tokens}" if words or tokens else ""


def _verdict(check: dict[str, Any] | None, good: str) -> bool | None:
    """A trust check's verdict as a filterable flag: True when `good`, None when not checked or
    when the check could not conclude ("inconclusive")."""
    verdict = (check or {}).get("verdict")
    if verdict in (None, "unchecked", "inconclusive"):
        return None
    return verdict == good


def reward_verdict(card: Any) -> str | None:
    """The reward check's one conclusion: `ok`, `flagged`, `inconclusive` or `unchecked` (None: no
    card). An `ok` with notes, as Hubs before `inconclusive` stored it, is inconclusive: its notes
    say why the play could not show the reward works."""
    if not isinstance(card, dict) or not card:
        return None
    verdict = card.get("verdict")
    notes = card.get("notes")
    if verdict == "ok" and isinstance(notes, list) and any(isinstance(n, str) and n for n in notes):
        return "inconclusive"
    return verdict if isinstance(verdict, str) else None


# The RFC 008 checks shown as badges when the current revision passed them: (check id, label, what
# it showed). Keyed by check id, as the report, the bot, the `check` filter and `openenv discover
# --check` are; the labels are for people.
CHECK_BADGES: tuple[tuple[str, str, str], ...] = (
    (
        "runtime.episode_determinism",
        "replays alike",
        "the declared plan, played twice from its seed, gave the same episode",
    ),
    (
        "hub.cross_host_determinism",
        "alike on two hosts",
        "the same plan and seed gave the same episode on a second machine",
    ),
    (
        "runtime.network_policy",
        "network walled",
        "the container reached nothing it was not granted, measured from inside it",
    ),
    (
        "statistical.reward_reachability",
        "top reward reachable",
        "the oracle reached the declared top reliably, and no reward left the range",
    ),
    (
        "statistical.adversarial_floor",
        "bad play floored",
        "deliberately bad play and the empty answer earned no more than the floor",
    ),
    ("hub.cosign_signature", "signed", "the published image carries the Hub's signature by its digest"),
)
_CHECK_TOKEN = re.compile(r"chk:(\S+):pass ")


def checks_passed(env: EnvRecord) -> list[str]:
    """The CHECK_BADGES ids the env's current revision passed, in CHECK_BADGES's order."""
    passed = set(_CHECK_TOKEN.findall(env.manifest_text or ""))
    return [cid for cid, _, _ in CHECK_BADGES if cid in passed]


def badges(env: EnvRecord) -> list[str]:
    """The trust badges the env's current version earned: deterministic, reward_checked, forkable, capacity."""
    earned = []
    if env.deterministic:
        earned.append("deterministic")
    if env.reward_checked:
        earned.append("reward_checked")
    if env.forkable:
        earned.append("forkable")
    if env.sessions_held is not None:
        earned.append("capacity")
    return earned


def summary(env: EnvRecord) -> EnvSummary:
    return EnvSummary(
        id=env.repo_id,
        owner=env.owner,
        name=env.name,
        source=env.source,
        title=env.title,
        description=env.description,
        tags=list(env.tags or []),
        likes=env.likes,
        status=env.status,
        stage=env.stage,
        sha=env.sha,
        url=env.host,
        cold_start_s=env.cold_start_s,
        step_p50_ms=env.step_p50_ms,
        badges=badges(env),
        checks_passed=checks_passed(env),
        deterministic=env.deterministic,
        reward_checked=env.reward_checked,
        sessions_held=env.sessions_held,
        updated_at=env.updated_at,
        gone=env.gone,
        health=env.health,
        deprecated=env.deprecated,
        successor=env.successor,
    )


def version_summary(v: EnvVersion) -> VersionSummary:
    return VersionSummary(
        sha=v.sha,
        ref=v.ref,
        state=v.state,
        validation_status=v.validation_status,
        build_status=v.build_status,
        smoke_status=v.smoke_status,
        cold_start_s=v.cold_start_s,
        step_p50_ms=v.step_p50_ms,
        step_p95_ms=v.step_p95_ms,
        failure_stage=v.failure_stage,
        failure_reason=v.failure_reason,
        failure_code=v.failure_code,
        waiting_code=v.waiting_code,
        waiting_reason=v.waiting_reason,
        waiting_since=v.waiting_since,
        yanked=v.yanked,
        yank_reason=v.yank_reason,
        created_at=v.created_at,
        finished_at=v.finished_at,
    )


def resolve(
    session: Session, settings: HubSettings, owner: str, name: str, revision: str | None, lock: str | None = None
) -> ResolveRecord:
    """What a client needs to connect to `owner/name` (at `revision`: a sha, a sha prefix or an image
    digest `sha256:...`; else the latest on main). An explicit pin (full sha, digest) is noted on the
    version and `lock` (a registered lock's id) is renewed, both for image collection: the caller commits.

    Raises:
        NotFound: unknown env or revision (or no revision with that image digest).
        Conflict: the revision was yanked and not asked for by sha.
    """
    env = get_env(session, owner, name)
    if env.gone:
        raise NotFound(f"{env.repo_id} is gone from its source", gone=True)
    digest = pins.digest_of(revision)
    version = pins.version_by_digest(session, env, digest) if digest else get_version(session, env, revision)
    if pins.is_explicit_pin(revision):
        pins.note_pin(version)
    lock_expires_at = pins.renew_lock(session, lock, settings.lock_ttl_days) if lock else None
    if version.yanked and not revision:
        raise Conflict(
            f"{env.repo_id}@{version.sha[:12]} was yanked; pin a revision explicitly to use it anyway", sha=version.sha
        )
    running = (env.stage or "").upper() == "RUNNING" and env.host is not None and version.sha == env.sha
    image = version.image_ref
    if version.image_digest and version.registry_ref:  # pushed to the registry: pulled by digest, anywhere
        image = f"{version.registry_ref.rsplit(':', 1)[0]}@{version.image_digest}"
    if env.source == "hf" and not image:
        image = settings.space_image_template.format(owner=env.owner.lower(), name=env.name.lower().replace("_", "-"))
    signature = _checked_signature(settings, env.repo_id, version) if image and version.registry_ref else None
    port = version.port or 8000
    local: dict[str, Any] = {}
    if image:
        local["container"] = f"docker run --rm -p 127.0.0.1:{port}:{port} {image}"
        local["docker"] = local["container"]  # its name before: older clients read it (it goes in the next release)
    # Where the service keeps a local source's folders is its own business: never in a record.
    local["python"] = f"EnvClient.from_hub({env.repo_id + '@' + version.sha!r}, trust_remote_code=True)"
    return ResolveRecord(
        repo_id=env.repo_id,
        revision=version.sha,
        status=env.status,
        stage=env.stage,
        url=env.host if running else None,
        image=image,
        image_digest=version.image_digest if version.registry_ref else None,
        image_tag=version.registry_ref if version.image_digest else None,
        port=port,
        source=env.source,
        local=local,
        yanked=version.yanked,
        deprecated=env.deprecated,
        successor=env.successor,
        deprecation_reason=env.deprecation_reason,
        capacity=version.capacity,
        lock_expires_at=lock_expires_at,
        signature=signature,
    )


def _checked_signature(settings: HubSettings, repo_id: str, version: EnvVersion) -> dict[str, Any] | None:
    """The pushed image's signature, checked here against the Hub's key before the record hands the
    image out (None: published before the Hub signed images).

    Raises:
        Conflict: it does not verify: the image is not handed out (fail closed).
    """
    from hub_service import signing

    record = version.signature
    if not isinstance(record, dict) or version.registry_ref is None or version.image_digest is None:
        return None
    reference = version.registry_ref.rsplit(":", 1)[0]
    try:
        body = base64.b64decode(str(record.get("payload")), validate=True)
        problem = signing.verify_signature(
            signing.public_key(settings), body, str(record.get("signature")), reference, version.image_digest
        )
    except ValueError as exc:
        problem = f"the signature record cannot be read ({exc})"
    if problem is not None:
        raise Conflict(
            f"{repo_id}@{version.sha[:12]}: its image's signature does not verify ({problem}); the Hub does not "
            "hand the image out: publish the revision again (a changed signing key needs that too)",
            sha=version.sha,
        )
    return {**record, "verified": True, "public_key": "/api/v1/signing-key"}
