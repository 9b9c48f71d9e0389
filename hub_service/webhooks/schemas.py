"""The Hugging Face Hub's webhook payload (version 3), as far as the service relies on it.

See https://huggingface.co/docs/hub/webhooks. The schema is as wide as what the Hub sends: unknown
fields are ignored (the Hub adds some over time), a repo type or scope this service does not know
parses (and the delivery is answered `ignored`, with the reason), a model may be named without an
owner (`gpt2`), and a push may update any number of refs (the request body's size is the bound,
OPENENV_HUB_MAX_BODY_BYTES). Only what the service acts on is checked, so a malformed payload is
refused up front.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["PR_REF", "WebhookPayload"]

_SHA = r"^[0-9a-f]{40,64}$"
# `owner/name`, or a bare `name`: the Hub still serves a few legacy models without an owner.
_REPO = r"^(?:[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/)?[A-Za-z0-9_.-]{1,96}$"
PR_REF = re.compile(r"^refs/pr/(\d{1,9})$")


class _Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Event(_Loose):
    action: Literal["create", "delete", "update", "move"]
    scope: str = Field(
        pattern=r"^[a-z][a-z.]{0,63}$",
        description="repo, repo.content, repo.config, discussion, discussion.comment, ...",
    )


class Repo(_Loose):
    type: str = Field(pattern=r"^[a-z][a-z_-]{0,31}$", description="model, dataset, space (or a type added later)")
    name: str = Field(pattern=_REPO, description="owner/name (a few legacy models: name)")
    id: str | None = Field(default=None, max_length=64)
    private: bool = False
    headSha: str | None = Field(default=None, pattern=_SHA, description="main's head (repo scopes only)")

    @property
    def owned(self) -> bool:
        return "/" in self.name


class Discussion(_Loose):
    num: int = Field(ge=1)
    isPullRequest: bool
    status: str = Field(max_length=16, description="open, closed, merged, draft")
    title: str | None = Field(default=None, max_length=1000)


class UpdatedRef(_Loose):
    ref: str = Field(max_length=1024)
    oldSha: str | None = Field(default=None, pattern=_SHA)
    newSha: str | None = Field(default=None, pattern=_SHA)


class MovedTo(_Loose):
    name: str = Field(pattern=_REPO)


class Webhook(_Loose):
    id: str = Field(max_length=64)
    version: int = Field(ge=3, le=3, description="the payload format version; this service reads version 3")


class WebhookPayload(_Loose):
    event: Event
    repo: Repo
    webhook: Webhook
    discussion: Discussion | None = None
    # No cap on the count: a push may update thousands of refs (tags); the body size bounds it.
    updatedRefs: list[UpdatedRef] | None = None
    movedTo: MovedTo | None = None

    @model_validator(mode="after")
    def _scope_parts(self) -> WebhookPayload:
        if self.event.scope.startswith("discussion") and self.discussion is None:
            raise ValueError("a discussion event needs its `discussion`")
        if self.event.action == "move" and self.movedTo is None:
            raise ValueError("a move event needs `movedTo`")
        return self

    def pr_refs(self) -> list[int]:
        """Pull requests whose ref this event updated (created, pushed to, or deleted)."""
        nums = []
        for ref in self.updatedRefs or []:
            match = PR_REF.match(ref.ref)
            if match:
                nums.append(int(match.group(1)))
        return sorted(set(nums))

    def touches_main(self) -> bool:
        """Whether main may have moved: any repo event except content updates of other refs only."""
        if self.event.scope != "repo.content" or not self.updatedRefs:
            return True
        return any(ref.ref in ("refs/heads/main", "main") for ref in self.updatedRefs)
