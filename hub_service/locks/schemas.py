"""Shapes of the locks API's replies (`/api/v1/locks`)."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, Field

__all__ = ["LockView"]


class LockView(BaseModel):
    id: str = Field(description="sha256 of the lock file's canonical JSON (sorted keys, no spaces)")
    envs: list[str] = Field(description="owner/name@sha of every env revision it locks")
    created_at: dt.datetime
    expires_at: dt.datetime = Field(
        description="Until when the Hub keeps its images; pushed on by registering it again or resolving through it"
    )
    renewed_at: dt.datetime | None = None
    owner: str | None = Field(default=None, description="The Hugging Face user who registered it")
