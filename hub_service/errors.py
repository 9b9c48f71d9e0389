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
"""

from __future__ import annotations

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
]


class HubError(Exception):
    status = 500
    code = "internal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
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
