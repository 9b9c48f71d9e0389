"""The Hub service's errors: one root, each mapped to an HTTP status and a stable `code`.

```
HubError
├── NotFound          404 not_found        unknown env / revision ("did you mean ...")
├── InvalidRequest    400 invalid_request  bad query parameters, cursors, ids
├── Conflict          409 conflict         e.g. a revision that is yanked
├── Unauthorized      401 unauthorized     maintainer action without a token
├── Forbidden         403 forbidden        wrong token
├── InvalidPayload    422 invalid_payload  a webhook body that is not a Hub webhook payload
└── SourceError       502 source_error     the Hugging Face Hub (or another source) failed
```
Replies are `{"error": {"code": ..., "message": ..., **details}}`.

An error has two texts: `str(error)`, whole, for the Hub's logs and its operator's commands, and
`error.message`, what visitors see (the API's replies, the website's notices), with the addresses
of servers the Hub runs scrubbed out (`scrub_addresses`). The scrub is made here, once, when any
`HubError` is made: an error class added later cannot forget it. A message that shows an address
on purpose (an endpoint the operator lists) names it in `public_urls`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = [
    "Conflict",
    "Forbidden",
    "HubError",
    "InvalidPayload",
    "InvalidRequest",
    "NotFound",
    "SourceError",
    "Unauthorized",
    "scrub_addresses",
]

# " [http://127.0.0.1:32795]" after a client error, and any other address of a machine the Hub runs:
# a URL with an IP address or localhost for its host, or such a host with a port ("172.17.0.5:8000").
_URL_SUFFIX = re.compile(r"\s*\[(?:https?|wss?)://[^\]\s]*\]")
_INTERNAL_URL = re.compile(
    r"(?:https?|wss?)://(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\])(?::\d+)?[^\s\]\)\"']*"
    r"|(?<![\w.:/])(?:localhost|\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}\b"
)
_TRAILING = ".,;:!?"  # punctuation after an address, not part of it


def scrub_addresses(text: str, keep: Iterable[str] = ()) -> str:
    """`text` without the addresses of servers the Hub runs (a visitor has no use for them), but
    for those in `keep` (shown on purpose)."""
    kept = {url.rstrip("/") for url in keep}

    def swap(found: re.Match[str], by: str) -> str:
        core = found.group(0).rstrip(_TRAILING)
        if core.strip().strip("[]").rstrip("/") in kept:
            return found.group(0)
        return by + found.group(0)[len(core) :]  # the punctuation after it stays

    text = _URL_SUFFIX.sub(lambda m: swap(m, ""), text)
    return _INTERNAL_URL.sub(lambda m: swap(m, "the env's server"), text).strip()


class HubError(Exception):
    status = 500
    code = "internal"

    def __init__(self, message: str, *, public_urls: Iterable[str] = (), **details: Any) -> None:
        super().__init__(message)  # whole, for the logs
        self.message = scrub_addresses(message, public_urls)  # what visitors see
        self.details = details

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.details}}


class NotFound(HubError):
    status, code = 404, "not_found"


class InvalidRequest(HubError):
    status, code = 400, "invalid_request"


class Conflict(HubError):
    status, code = 409, "conflict"


class Unauthorized(HubError):
    status, code = 401, "unauthorized"


class Forbidden(HubError):
    status, code = 403, "forbidden"


class InvalidPayload(HubError):
    status, code = 422, "invalid_payload"


class SourceError(HubError):
    status, code = 502, "source_error"
