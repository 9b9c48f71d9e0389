"""Limits every Hub process shares through the database: rate-limit buckets and play leases.

`SharedRateLimiter` (buckets.py) counts requests per (category, client) in `rate_buckets`;
`LeaseBook` (leases.py) counts the play sessions and model tries held right now in `play_leases`,
each renewed by its process's heartbeat, so a process that dies stops counting after its lease.
"""

from __future__ import annotations

from hub_service.quota.buckets import SharedRateLimiter
from hub_service.quota.leases import LeaseBook

__all__ = ["LeaseBook", "SharedRateLimiter"]
