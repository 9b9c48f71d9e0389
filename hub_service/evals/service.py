"""Recording evals and reading leaderboards."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from urllib.parse import urlsplit

from sqlalchemy.orm import Session

from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.evals.models import EVAL_SOURCES, Eval

__all__ = ["endpoint_host", "interval", "record_eval"]

# Student's t at 0.975 for 1..30 degrees of freedom; 1.96 beyond.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def interval(returns: Sequence[float]) -> tuple[float, float, float]:
    """The mean of `returns` and its 95% interval (Student's t; a single episode's interval is the point)."""
    if not returns:
        raise ValueError("an eval needs at least one episode's return")
    mean = statistics.fmean(returns)
    if len(returns) < 2:
        return mean, mean, mean
    df = len(returns) - 1
    half = (_T975[df - 1] if df <= len(_T975) else 1.96) * statistics.stdev(returns) / math.sqrt(len(returns))
    return mean, mean - half, mean + half


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
        env_id=env.id, version_id=version.id, sha=version.sha, source=source, model=model[:256],
        endpoint_host=endpoint_host(endpoint), submitted_by=submitted_by, episodes=len(returns),
        mean_return=mean, ci_low=low, ci_high=high, returns=[float(r) for r in returns],
    )
    session.add(row)
    session.flush()
    return row
