"""The Hub API's Space listing, page by page as its `Link` headers lead, with its 429s honoured.

`huggingface_hub`'s `list_spaces` follows the pages itself but hides where it is, and on a 429 it
sleeps as long as `Retry-After` says, an hour if the Hub says an hour. A crawl of tens of thousands
of Spaces needs the URL of the next page (kept, so that an interrupted crawl resumes there) and
waits bounded by a setting (`OPENENV_HUB_HF_CRAWL_WAIT_MAX_S`): a wait past what is left stops the
crawl for now (`CrawlPaused`). The requests go through huggingface_hub's own session, headers and
error checks; the items are read into its `SpaceInfo`, as `list_spaces` reads them.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hub_service.errors import SourceError

__all__ = ["CrawlPaused", "ListingRefused", "RawPage", "WaitBudget", "listing_pages", "retry_after_s"]

# Statuses that say "not now": the Hub's rate limit, and a service briefly unavailable.
_NOT_NOW = (429, 503)
_BACKOFF_CAP_S = 30.0  # the longest wait between tries when the Hub names none
_MIN_WAIT_S = 1.0  # Retry-After counts whole seconds; "0" again and again must not spin
_TIMEOUT_S = 60.0


class CrawlPaused(SourceError):
    """The Hub asked for a longer wait than the crawl has left; the crawl resumes at `resume_url`."""

    def __init__(self, message: str, *, resume_url: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.resume_url = resume_url
        self.retry_after_s = retry_after_s


class ListingRefused(SourceError):
    """The Hub answered a listing page with a client error (e.g. a page link it no longer knows)."""


@dataclass
class RawPage:
    url: str
    items: list[dict[str, Any]]
    next_url: str | None


class WaitBudget:
    """The seconds a crawl may still wait, spent as the Hub asks; `sleep` is the clock's."""

    def __init__(self, max_s: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.max_s = max_s
        self.waited_s = 0.0
        self._sleep = sleep

    def wait(self, seconds: float, url: str, status: int) -> None:
        """Wait `seconds` before asking `url` again.

        Raises:
            CrawlPaused: that wait is longer than what is left of the budget.
        """
        left = self.max_s - self.waited_s
        if seconds > left:
            raise CrawlPaused(
                f"the Hub answered {status} and asked to wait {seconds:.0f} s, more than the {left:.0f} s this crawl "
                f"has left of OPENENV_HUB_HF_CRAWL_WAIT_MAX_S={self.max_s:g}: it stops here, and the next index pass "
                "resumes at this page",
                resume_url=url,
                retry_after_s=seconds,
            )
        self._sleep(seconds)
        self.waited_s += seconds


def retry_after_s(headers: Mapping[str, str], now: dt.datetime | None = None) -> float | None:
    """The wait a reply asks for: `Retry-After` (seconds or an HTTP date), else the reset of the
    IETF `RateLimit` header when no request is left; None when it names none."""
    from huggingface_hub.utils import parse_ratelimit_headers

    value = (headers.get("retry-after") or "").strip()
    if value.isdigit():
        return float(value)
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None and when.tzinfo is not None:
            return max(0.0, (when - (now or dt.datetime.now(dt.UTC))).total_seconds())
    limits = parse_ratelimit_headers(headers)
    if limits is not None and limits.remaining == 0:
        return float(limits.reset_in_seconds)
    return None


def listing_pages(first_url: str, headers: dict[str, str], budget: WaitBudget) -> Iterator[RawPage]:
    """The pages of a listing from `first_url` (a page's own URL: the first, or where a crawl
    stopped), each with the URL of the next.

    Raises:
        CrawlPaused: the Hub asked to wait longer than `budget` has left.
        ListingRefused: the Hub refused a page (4xx).
        SourceError: the Hub did not answer, or answered with something that is not a page.
    """
    url: str | None = first_url
    while url is not None:
        reply = _get(url, headers, budget)
        items = reply.json()
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise SourceError(f"the Hub's listing page {url} is not a list of Spaces")
        next_url = reply.links.get("next", {}).get("url")
        yield RawPage(url=url, items=items, next_url=str(next_url) if next_url else None)
        url = next_url


def _get(url: str, headers: dict[str, str], budget: WaitBudget) -> Any:
    from huggingface_hub.utils import get_session, hf_raise_for_status

    tries = 0
    while True:
        try:
            reply = get_session().get(url, headers=headers, timeout=_TIMEOUT_S)
        except Exception as exc:  # the client's transport errors: the Hub did not answer
            raise SourceError(f"the Hub did not answer the listing page {url}: {exc}") from exc
        if reply.status_code not in _NOT_NOW:
            break
        asked = retry_after_s(reply.headers)
        wait = asked if asked is not None else min(_BACKOFF_CAP_S, 2.0**tries)
        budget.wait(max(_MIN_WAIT_S, wait), url, reply.status_code)
        tries += 1
    try:
        hf_raise_for_status(reply)
    except Exception as exc:  # huggingface_hub's HfHubHTTPError and its kinds
        kind = ListingRefused if 400 <= reply.status_code < 500 else SourceError
        raise kind(f"the Hub refused the listing page {url}: {exc}") from exc
    return reply
