"""Shapes of the evals API: a leaderboard, and a submitted run (`/api/v1/envs/{owner}/{name}/...`)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, Field, field_validator, model_validator

__all__ = ["MAX_EPISODES", "EvalSubmission", "Leaderboard", "LeaderboardEntry", "SubmittedEval"]

MAX_EPISODES = 1000  # per submitted run
MAX_ABS_RETURN = 1e12  # beyond this a return is a bug, not a score (and would overflow the interval)

Return = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-MAX_ABS_RETURN, le=MAX_ABS_RETURN)]


class LeaderboardEntry(BaseModel):
    """Every run of one model (through one endpoint host, by one submitter, from one source) on one
    revision, pooled: `episodes` counts all their episodes and the mean and interval are over all of them."""

    rank: int = Field(description="1 is the best mean return among all entries (of the revision asked for)")
    model: str = Field(description='The model\'s name; "random" for the random baseline')
    source: str = Field(
        description="baseline (the Hub's random policy, played on every passing revision), website "
        '("let a model try" on the env\'s page) or cli (submitted with `openenv eval` and a token)'
    )
    endpoint_host: str | None = Field(
        default=None, description="Host of the model's OpenAI-compatible endpoint (never its path or token)"
    )
    submitted_by: str | None = Field(
        default=None, description="Hugging Face user who submitted it (cli); null for baseline and website runs"
    )
    revision: str = Field(description="The sha the runs played")
    yanked: bool = Field(default=False, description="The revision was yanked by a maintainer since")
    episodes: int
    runs: int = Field(description="How many runs were pooled into this entry")
    mean_return: float
    ci_low: float = Field(description="Low end of the 95% interval of the mean return (Student's t)")
    ci_high: float = Field(description="High end of the 95% interval of the mean return")
    date: dt.datetime = Field(description="When its newest run was recorded")


class Leaderboard(BaseModel):
    env: str = Field(description="owner/name")
    revision: str | None = Field(default=None, description="The sha the board is filtered to; null: every revision")
    total: int = Field(
        description="How many entries there are (entries holds at most `limit`, plus the random baseline)"
    )
    entries: list[LeaderboardEntry]


class EvalSubmission(BaseModel):
    """One scored run of a model on a revision, as `openenv eval` sends it."""

    model: str = Field(min_length=1, max_length=256, description="The model's name as its endpoint knows it")
    base_url: str | None = Field(
        default=None, max_length=2000, description=("The model's OpenAI-compatible base URL; only its host is stored")
    )
    revision: str = Field(
        min_length=7,
        max_length=64,
        description="The sha played (or a prefix of 7+ hex digits); it must have passed the Hub's checks",
    )
    episodes: int = Field(ge=1, le=MAX_EPISODES, description=f"How many episodes were played (1 to {MAX_EPISODES})")
    returns: list[Return] = Field(
        min_length=1, max_length=MAX_EPISODES, description="Each episode's return, finite numbers"
    )
    max_steps: int | None = Field(
        default=None, ge=1, le=1_000_000, description="The step limit per episode used (informational)"
    )

    @field_validator("model")
    @classmethod
    def _printable(cls, value: str) -> str:
        value = value.strip()
        if not value or any(not ch.isprintable() for ch in value):
            raise ValueError("the model name must be printable text (no control characters)")
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if any(not ch.isprintable() or ch.isspace() for ch in value.strip()):
            raise ValueError("base_url must be a URL without spaces or control characters")
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be an http(s) URL naming a host, e.g. https://router.huggingface.co/v1")
        return value.strip()

    @model_validator(mode="after")
    def _counted(self) -> EvalSubmission:
        if self.episodes != len(self.returns):
            raise ValueError(
                f"episodes is {self.episodes} but {len(self.returns)} returns were sent: send one return per episode"
            )
        return self


class SubmittedEval(BaseModel):
    id: int
    env: str
    model: str
    source: str
    endpoint_host: str | None
    submitted_by: str | None
    revision: str
    episodes: int
    mean_return: float
    ci_low: float
    ci_high: float
    created_at: dt.datetime
    leaderboard: str = Field(description="Path of the env's leaderboard")
