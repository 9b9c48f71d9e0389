"""Recording evals and reading leaderboards."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import VersionState
from hub_service.errors import Conflict, SourceError, Unauthorized
from hub_service.evals.models import EVAL_SOURCES, Eval
from openenv.evaluation import mean_interval

__all__ = [
    "Standing",
    "endpoint_host",
    "interval",
    "leaderboard",
    "passed_version",
    "record_eval",
    "record_try",
    "user_of_token",
]

# The newest runs a leaderboard is made of (per env): enough for any board, bounded for a busy one.
MAX_RUNS_READ = 20_000
# Whose a token is, remembered briefly (by its hash): the Hugging Face Hub rate-limits whoami
# hard, and one user submitting several runs should not be turned away for it. Only accepted
# tokens are remembered, so a revoked one is refused again at most this long after.
WHOAMI_TTL_S = 300.0
_WHO_MAX = 4096
_WHO: dict[tuple[str, str], tuple[str, float]] = {}
_WHO_LOCK = threading.Lock()

# The mean and 95% interval of returns, as `openenv eval` computes them before it submits.
interval = mean_interval


def endpoint_host(base_url: str | None) -> str | None:
    """The host (and port, when not the scheme's default) of a model endpoint's base URL; never its path or query."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    return (parts.netloc.rsplit("@", 1)[-1] or None) if parts.netloc else None


def record_eval(
    session: Session,
    env: EnvRecord,
    version: EnvVersion,
    *,
    source: str,
    model: str,
    returns: Sequence[float],
    endpoint: str | None = None,
    submitted_by: str | None = None,
) -> Eval:
    """Store one scored run of `version` (the caller commits). `endpoint` is the model's base URL;
    only its host is kept."""
    if source not in EVAL_SOURCES:
        raise ValueError(f"source must be one of {EVAL_SOURCES}, not {source!r}")
    mean, low, high = interval(returns)
    row = Eval(
        env_id=env.id,
        version_id=version.id,
        sha=version.sha,
        source=source,
        model=model[:256],
        endpoint_host=endpoint_host(endpoint),
        submitted_by=submitted_by,
        episodes=len(returns),
        mean_return=mean,
        ci_low=low,
        ci_high=high,
        returns=[float(r) for r in returns],
    )
    session.add(row)
    session.flush()
    return row


# -- leaderboards ------------------------------------------------------------------------------------------


@dataclass
class Standing:
    """One leaderboard entry: every run of one model, through one endpoint host, by one submitter
    (or anonymous), from one source, on one revision, pooled: episodes add up and the mean and its
    interval are over all their episodes."""

    rank: int
    model: str
    source: str
    endpoint_host: str | None
    submitted_by: str | None
    revision: str
    yanked: bool
    episodes: int
    runs: int
    mean_return: float
    ci_low: float
    ci_high: float
    date: dt.datetime  # of its newest run


def leaderboard(
    session: Session, env: EnvRecord, *, sha: str | None = None, limit: int = 50
) -> tuple[list[Standing], int]:
    """The env's standings, best mean return first (then more episodes, then newer), and how many
    there are. At most `limit` are returned, plus the random baseline of the env's current revision
    (else the newest one) when it would have been cut off: a board always shows what a random policy scores."""
    stmt = (
        select(Eval, EnvVersion.yanked)
        .outerjoin(EnvVersion, EnvVersion.id == Eval.version_id)
        .where(Eval.env_id == env.id)
        .order_by(Eval.id.desc())
        .limit(MAX_RUNS_READ)
    )
    if sha is not None:
        stmt = stmt.where(Eval.sha == sha)
    groups: dict[tuple[Any, ...], list[tuple[Eval, bool]]] = {}
    for row, yanked in session.execute(stmt).all():
        key = (row.sha, row.source, row.model, row.endpoint_host, row.submitted_by)
        groups.setdefault(key, []).append((row, bool(yanked)))
    standings = []
    for (revision, source, model, host, who), runs in groups.items():
        returns = [float(r) for row, _ in runs for r in row.returns]
        mean, low, high = interval(returns)
        standings.append(
            Standing(
                rank=0,
                model=model,
                source=source,
                endpoint_host=host,
                submitted_by=who,
                revision=revision,
                yanked=runs[0][1],
                episodes=len(returns),
                runs=len(runs),
                mean_return=mean,
                ci_low=low,
                ci_high=high,
                date=max(row.created_at for row, _ in runs),
            )
        )
    standings.sort(key=lambda s: (-s.mean_return, -s.episodes, -s.date.timestamp()))
    for rank, standing in enumerate(standings, 1):
        standing.rank = rank
    shown = standings[:limit]
    if not any(s.source == "baseline" for s in shown):
        baselines = [s for s in standings if s.source == "baseline"]
        if baselines:
            current = session.get(EnvVersion, env.latest_version_id) if env.latest_version_id is not None else None
            ours = [s for s in baselines if current is not None and s.revision == current.sha]
            shown.append(ours[0] if ours else max(baselines, key=lambda s: s.date))
    return shown, len(standings)


# -- submissions ----------------------------------------------------------------------------------------------


def passed_version(session: Session, env: EnvRecord, revision: str) -> EnvVersion:
    """The version `revision` (a sha or a prefix of 7+ hex digits) of `env`, which must have passed.

    Raises:
        NotFound: no such revision.  InvalidRequest: a malformed or ambiguous revision.
        Conflict: the revision did not pass the Hub's checks (or has not finished them).
    """
    from hub_service.catalog.service import get_version

    version = get_version(session, env, revision)
    if version.state != VersionState.PASSED:
        raise Conflict(
            f"{env.repo_id}@{version.sha[:12]} is {version.state}, not passed: evals are taken only for revisions "
            "that passed the Hub's checks; evaluate a passing revision (leave --revision out for the current one)",
            state=version.state,
        )
    return version


def user_of_token(hf_endpoint: str | None, authorization: str | None) -> str:
    """The Hugging Face user name a bearer token belongs to, asked of the Hugging Face Hub (whoami).

    Raises:
        Unauthorized: no bearer token, or the Hub does not accept it.
        SourceError: the Hub could not be asked.
    """
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(
            "submitting an eval needs your Hugging Face token: send `Authorization: Bearer hf_...` "
            "(`openenv eval` sends --token or HF_TOKEN)"
        )
    if len(token) > 512 or not token.isascii() or not token.isprintable() or " " in token:
        raise Unauthorized(
            "this is not a Hugging Face token (one word of printable ASCII): send `Authorization: Bearer hf_...`"
        )
    import httpx2  # huggingface_hub's own HTTP library (2.x)
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    where = hf_endpoint or "https://huggingface.co"
    key = (where, hashlib.sha256(token.encode()).hexdigest())
    with _WHO_LOCK:
        known = _WHO.get(key)
    if known is not None and known[1] > time.monotonic():
        return known[0]
    try:
        who = HfApi(endpoint=hf_endpoint).whoami(token=token)
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in (401, 403):
            raise Unauthorized(
                f"the Hugging Face Hub ({where}) does not accept this token; create a token at "
                f"{where}/settings/tokens and send it as `Authorization: Bearer hf_...`"
            ) from None
        raise SourceError(
            f"asking the Hugging Face Hub ({where}) whose token this is failed ({status}); try again later"
        ) from None
    except (httpx2.TransportError, OSError) as exc:
        raise SourceError(
            f"the Hugging Face Hub ({where}) could not be asked whose token this is ({type(exc).__name__}); "
            "try again later"
        ) from None
    name = who.get("name") if isinstance(who, dict) else None
    if not isinstance(name, str) or not name:
        raise SourceError(f"the Hugging Face Hub ({where}) answered whoami without a user name")
    with _WHO_LOCK:
        if len(_WHO) >= _WHO_MAX:
            _WHO.clear()
        _WHO[key] = (name, time.monotonic() + WHOAMI_TTL_S)
    return name


def record_try(
    session: Session, env_id: str, sha: str, *, model: str, base_url: str, returns: Sequence[float]
) -> Eval | None:
    """Store a website "let a model try" run of `env_id`@`sha` (the caller commits); None when the
    env or its revision is no longer in the catalog."""
    owner, _, name = env_id.partition("/")
    env = session.scalar(select(EnvRecord).where(EnvRecord.owner == owner, EnvRecord.name == name))
    version = (
        session.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id, EnvVersion.sha == sha)) if env else None
    )
    if env is None or version is None:
        return None
    return record_eval(session, env, version, source="website", model=model, returns=returns, endpoint=base_url)
