"""Play sessions and model tries: private env sessions for website visitors, kept in memory.

`PlayManager` (sessions.py) opens a session per browser tab on an env instance from
`InstancePool` (instances.py): the live Space when it runs, else a local container or process
the service starts and stops. `policies.py` and `episodes.py` let a model (or a random
baseline) play episodes and stream what it did.
"""

from __future__ import annotations

from hub_service.play.errors import NotPlayable, PlayError, PlayLimit, PlayStartError

__all__ = ["NotPlayable", "PlayError", "PlayLimit", "PlayStartError"]
