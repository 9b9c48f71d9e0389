"""What a well-formed request to Gradio's own routes looks like, read from the site's `Blocks`.

Gradio answers some malformed requests with a server error (an unknown `fn_index` or API name:
500) or with a stream it breaks off after the 200 (an unknown session or event id). The website's
guard asks this module first and answers those with a 4xx that says what is wrong. It reads
Gradio's queue to know the live sessions and events (attributes of the pinned Gradio version;
tests/fuzz exercises them).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qs

__all__ = ["GradioShape"]

_PREFIX = "/gradio_api/"
_DIRECT = _PREFIX + "run/predict"  # Gradio's route for functions set queue=False
_NAMED = re.compile(r"^/gradio_api/call/(?:v2/)?([^/]+)/?$")
_EVENT = re.compile(r"^/gradio_api/call/(?:v2/)?([^/]+)/([^/]+)/?$")
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # session hashes and event ids Gradio makes
Refusal = tuple[int, dict[str, Any]]


def _invalid(field: str, message: str) -> Refusal:
    return 422, {"code": "invalid_request", "message": message, "errors": [{"loc": ["body", field], "msg": message}]}


class GradioShape:
    """Checks of requests to `/gradio_api/...` against the site `blocks` (a `gr.Blocks`)."""

    def __init__(self, blocks: Any) -> None:
        self.blocks = blocks

    def _api_names(self) -> set[str]:
        return {fn.api_name for fn in self.blocks.fns.values() if getattr(fn, "api_name", None)}

    def _fns_of(self, session_hash: str | None) -> dict[int, Any]:
        fns: dict[int, Any] = dict(self.blocks.fns)
        holder = getattr(self.blocks, "state_holder", None)
        if session_hash and holder is not None and session_hash in holder:
            fns.update(holder[session_hash].blocks_config.fns)  # gr.render adds functions per session
        return fns

    def checks_body(self, path: str) -> bool:
        return (
            path.rstrip("/") == _PREFIX + "queue/join"
            or _NAMED.match(path) is not None
            or path.startswith((_PREFIX + "run/", _PREFIX + "api/"))
        )

    def refuse_post(self, path: str, raw: bytes) -> Refusal | None:
        """Why Gradio must not see this POST (status, error), or None."""
        direct = path.rstrip("/") == _DIRECT
        if path.startswith((_PREFIX + "run/", _PREFIX + "api/")) and not direct:
            # The synchronous routes skip the queue and answer 500 whenever a function refuses its
            # input; the website and its API clients use the queued `call/` routes. The one
            # exception, `run/predict`, runs only the play panel's steps (queue=False: one round
            # trip, not a queue join and an event stream), and the guard answers its 500s as 422s.
            return 404, {
                "code": "not_found",
                "message": "the website runs its functions through the queue: POST /gradio_api/call/<name>, "
                "or use the JSON API at /api/v1",
            }
        named = _NAMED.match(path)
        if named is not None and named.group(1) not in self._api_names():
            return 404, {"code": "not_found", "message": f"the website has no function {named.group(1)!r}"}
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return _invalid("body", "the body must be a JSON object with `data`, a list of inputs")
        if not isinstance(body, dict):
            return _invalid("body", "the body must be a JSON object with `data`, a list of inputs")
        if not isinstance(body.get("data"), list):
            return _invalid("data", "`data` must be a list of the function's inputs")
        session_hash = body.get("session_hash")
        if session_hash is not None and not (isinstance(session_hash, str) and _TOKEN.match(session_hash)):
            return _invalid("session_hash", "`session_hash` is 1 to 64 letters, digits, '-' or '_'")
        fn_index = body.get("fn_index")
        if named is None:  # a queue join (or a direct step) names its function by index
            if session_hash is None:
                return _invalid("session_hash", "a queue join needs a `session_hash`")
            if isinstance(fn_index, bool) or not isinstance(fn_index, int):
                return _invalid("fn_index", "`fn_index` must be the number of one of the website's functions")
        if fn_index is not None and (
            isinstance(fn_index, bool)
            or not isinstance(fn_index, int)
            or fn_index not in self._fns_of(session_hash if isinstance(session_hash, str) else None)
        ):
            return _invalid("fn_index", "`fn_index` must be the number of one of the website's functions")
        if (
            direct
            and fn_index is not None
            and getattr(self._fns_of(session_hash).get(fn_index), "queue", True) is not False
        ):
            return 404, {
                "code": "not_found",
                "message": "this function runs through the queue: POST /gradio_api/queue/join",
            }
        return None

    def refuse_get(self, path: str, query_string: bytes) -> Refusal | None:
        """Why Gradio must not see this GET (an event stream it would break off), or None."""
        queue = getattr(self.blocks, "_queue", None)
        if queue is None:
            return None
        if path.rstrip("/") == _PREFIX + "queue/data":
            values = parse_qs(query_string.decode("latin-1")).get("session_hash", [])
            session_hash = values[0] if values else ""
            if session_hash not in queue.pending_messages_per_session:
                return 404, {
                    "code": "not_found",
                    "message": "no website session is waiting for events under this session_hash; join the queue first",
                }
            return None
        event = _EVENT.match(path)
        if event is None or event.group(1) == "v2":
            return None
        event_id = event.group(2)
        known = event_id in queue.event_ids_to_events or any(
            event_id in ids for ids in queue.pending_event_ids_session.values()
        )
        if not known:
            return 404, {
                "code": "not_found",
                "message": f"the website has no event {event_id[:64]!r} (it ended, or never began)",
            }
        return None
