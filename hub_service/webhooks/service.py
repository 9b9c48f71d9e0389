"""Receiving Hub webhooks: check the secret, validate, record the delivery, queue the work.

The endpoint does no work beyond one short transaction: the jobs it queues read the current state
from the Hub when they run. A webhook is a hint that something changed, never the truth about
what: a duplicate, a replay, or a delivery that arrives after a newer one re-reads the same current
state and changes nothing, and a forged sha in a payload cannot put a revision into the catalog.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy import or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog.models import EnvRecord
from hub_service.db import affected_rows, session_scope, utcnow
from hub_service.errors import Forbidden, InvalidPayload, Unauthorized
from hub_service.queue.jobs import enqueue_task
from hub_service.settings import HubSettings
from hub_service.webhooks.models import WebhookDelivery, WebhookSubject
from hub_service.webhooks.schemas import WebhookPayload
from hub_service.webhooks.tasks import ignore_ownerless_move

__all__ = ["Accepted", "check_secret", "parse", "receive"]

log = logging.getLogger("hub_service.webhooks")

# Webhook work runs before the crawl's pipeline jobs (priority 100): it is what people wait for.
PRIORITY_INDEX = 20
PRIORITY_PR = 30


@dataclass
class Accepted:
    """What became of a delivery: queued (with jobs), ignored (with the reason), or a duplicate."""

    delivery: int | None
    status: str
    reason: str | None = None
    jobs: list[int] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        return {"delivery": self.delivery, "status": self.status, "reason": self.reason, "jobs": self.jobs}


def check_secret(settings: HubSettings, header: str | None, query: str | None = None) -> None:
    """Compare the secret the Hub sent (the `X-Webhook-Secret` header, or `?secret=` in the
    handler's URL as the Hub's docs also suggest) with the configured one, in constant time.

    Raises:
        Forbidden: webhooks are not configured, or the secret is wrong.
        Unauthorized: no secret was sent.
    """
    if settings.webhook_secret is None:
        raise Forbidden(
            "webhooks are not enabled on this service: set OPENENV_HUB_WEBHOOK_SECRET and give the Hub the same secret"
        )
    given = header or query
    if not given:
        raise Unauthorized("send the webhook's secret in the X-Webhook-Secret header (or as ?secret= in the URL)")
    expected = settings.webhook_secret.get_secret_value().encode("utf-8")
    if not hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected):
        raise Forbidden("the webhook's secret does not match this service's webhook secret")


def _holds_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_nul(v) for v in value)
    return False


MAX_DEPTH = 32  # a Hub payload nests 4 levels; far deeper JSON is an attack on the parser
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def _too_deep(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays and objects nest deeper than `limit` anywhere in `body` (JSON text), found
    without parsing it: deep enough JSON exhausts the parser's recursion."""
    depth = 0
    for match in _BRACKET.finditer(_STRING.sub(b'""', body)):
        depth += 1 if match.group() in (b"[", b"{") else -1
        if depth > limit:
            return True
    return False


def parse(body: bytes) -> tuple[WebhookPayload, str]:
    """The payload and its idempotency key (sha256 of its canonical JSON). The body's size is
    capped before it gets here (hub_service/limits.py: OPENENV_HUB_MAX_BODY_BYTES).

    Raises:
        InvalidPayload: not JSON, or not a Hub webhook payload (the message says what is wrong).
    """
    if _too_deep(body):
        raise InvalidPayload(
            f"the webhook body nests arrays or objects more than {MAX_DEPTH} levels deep; no Hub payload does"
        )
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidPayload(f"the webhook body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidPayload("the webhook body must be a JSON object with `event`, `repo` and `webhook`")
    if _holds_nul(data):
        raise InvalidPayload("the webhook body holds a NUL character (\\u0000) in a string; no Hub payload does")
    try:
        payload = WebhookPayload.model_validate(data)
    except ValidationError as exc:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"]) or "payload"
        raise InvalidPayload(
            f"not a Hugging Face webhook payload (version 3): {where}: {first['msg']}; see https://huggingface.co/docs/hub/webhooks",
            errors=errors,
        ) from exc
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return payload, hashlib.sha256(canonical).hexdigest()


def receive(factory: sessionmaker[Session], settings: HubSettings, payload: WebhookPayload, key: str) -> Accepted:
    """Record a delivery and queue its work, unless it is a replay that would change nothing.

    The Hub's payloads carry no delivery id: the same change made twice is byte-identical. So a
    delivery is a duplicate only when the same bytes were the last thing seen for its repo, within
    `webhook_replay_window_s` (a retry, a Replay click, or two deliveries racing). Anything else is
    applied: its jobs compare what the Hub says now with what the catalog has, so a late replay
    changes nothing and a genuine repeat of an earlier state (close, reopen, close) takes effect.
    """
    subject = f"{payload.repo.type}:{payload.repo.name}"[:300]
    with session_scope(factory) as session:
        earlier = _claim(session, subject, key, settings.webhook_replay_window_s)
        if earlier is not None:
            result = Accepted(
                earlier, "duplicate", f"delivery {earlier} had this payload moments ago, with nothing else since"
            )
        else:
            delivery = WebhookDelivery(
                key=key,
                scope=payload.event.scope,
                action=payload.event.action,
                repo_type=payload.repo.type[:16],
                repo=payload.repo.name[:200],
                head_sha=payload.repo.headSha,
                webhook_id=payload.webhook.id,
                discussion_num=payload.discussion.num if payload.discussion else None,
                outcome="ignored",
                job_ids=[],
            )
            session.add(delivery)
            session.flush()
            session.execute(
                update(WebhookSubject).where(WebhookSubject.subject == subject).values(last_delivery=delivery.id)
            )
            cause = f"webhook delivery {delivery.id} ({payload.event.scope} {payload.event.action})"
            job_ids, reason = _plan(session, settings, payload, cause)
            delivery.job_ids = [str(j) for j in job_ids]
            delivery.outcome, delivery.reason = ("queued", None) if job_ids else ("ignored", reason)
            result = Accepted(delivery.id, delivery.outcome, delivery.reason, job_ids)
    log.info(
        "webhook %s %s %s: %s %s",
        payload.event.scope,
        payload.event.action,
        payload.repo.name,
        result.status,
        result.reason or result.jobs,
    )
    return result


def _claim(session: Session, subject: str, key: str, window_s: float) -> int | None:
    """Make `key` the subject's last payload; returns the earlier delivery's id instead when the
    same payload was the last one within the window (a duplicate), None when this one is to apply.

    One conditional UPDATE decides, so two processes receiving the same delivery at once agree:
    the second waits for the first's row lock, then finds the key already there."""
    now = utcnow()
    fresh = or_(WebhookSubject.last_key != key, WebhookSubject.seen_at < now - dt.timedelta(seconds=window_s))
    claim = update(WebhookSubject).where(WebhookSubject.subject == subject, fresh)
    if affected_rows(session.execute(claim.values(last_key=key, seen_at=now, last_delivery=None))):
        return None
    row = session.get(WebhookSubject, subject, populate_existing=True)
    if row is None:
        try:
            with session.begin_nested():
                session.add(WebhookSubject(subject=subject, last_key=key, seen_at=now))
            return None
        except IntegrityError:  # another process saw this repo's first delivery at the same moment
            if affected_rows(session.execute(claim.values(last_key=key, seen_at=now, last_delivery=None))):
                return None
            row = session.get(WebhookSubject, subject, populate_existing=True)
    return (row.last_delivery or 0) if row is not None else 0


def _plan(session: Session, settings: HubSettings, payload: WebhookPayload, cause: str) -> tuple[list[int], str]:
    """Queue the jobs a payload calls for; returns their ids, or none and why.

    Every job reads the current state from the Hub when it runs (a payload is a hint, not the
    truth), so the plan only decides which repo or pull request to look at again."""
    if payload.repo.type != "space":
        return [], f"a {payload.repo.type} repo, not a Space"
    if not payload.repo.owned:
        return [], f"{payload.repo.name!r} names no owner; the catalog indexes Spaces, which always have one"
    repo, scope = payload.repo.name, payload.event.scope
    if payload.movedTo is not None and "/" not in payload.movedTo.name:
        return [], ignore_ownerless_move(session, repo, payload.movedTo.name, cause)
    if scope == "discussion.comment":
        return [], "comments do not change a pull request"
    if scope == "discussion":
        assert payload.discussion is not None  # the schema requires it
        if not payload.discussion.isPullRequest:
            return [], "a discussion, not a pull request"
        # create, update (status, title, merge) and delete alike: the sync asks the Hub
        return _pr_jobs(session, settings, repo, [payload.discussion.num], cause)
    if scope not in _REPO_SCOPES:
        return [], f"scope {scope!r} is not one this service acts on"
    job_ids: list[int] = []
    if payload.touches_main():
        args: dict[str, Any] = {"repo": repo, "cause": cause, "action": payload.event.action}
        if payload.repo.headSha:
            args["sha_hint"] = payload.repo.headSha
        if payload.movedTo is not None:
            args["moved_to"] = payload.movedTo.name
        job, _ = enqueue_task(session, "index_repo", f"repo:hf:{repo}", args, priority=PRIORITY_INDEX)
        job_ids.append(job.id)
    pr_ids, reason = _pr_jobs(session, settings, repo, payload.pr_refs(), cause) if payload.pr_refs() else ([], "")
    job_ids += pr_ids
    return job_ids, reason or "no change to main or to a pull request"


# repo: create, update, delete, move; repo.content: commits (updatedRefs); repo.config: settings
# such as visibility, which decide whether the Space belongs in the catalog.
_REPO_SCOPES = ("repo", "repo.content", "repo.config")


def _pr_jobs(session: Session, settings: HubSettings, repo: str, nums: list[int], cause: str) -> tuple[list[int], str]:
    if not settings.pr_bot:
        return [], "the pull-request bot is off (OPENENV_HUB_PR_BOT)"
    owner, _, name = repo.partition("/")
    env = session.scalar(
        select(EnvRecord.id).where(
            EnvRecord.source == "hf", EnvRecord.owner == owner, EnvRecord.name == name, EnvRecord.gone.is_(False)
        )
    )
    if env is None:
        return [], f"{repo} is not an indexed Space"
    ids = []
    for num in nums:
        job, _ = enqueue_task(
            session, "pr_sync", f"pr:{repo}#{num}", {"repo": repo, "num": num, "cause": cause}, priority=PRIORITY_PR
        )
        ids.append(job.id)
    return ids, ""
