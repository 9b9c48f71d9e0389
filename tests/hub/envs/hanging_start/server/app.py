"""Never comes up: importing the app blocks forever (a model download that never ends, say)."""

from __future__ import annotations

import time

time.sleep(10**9)
app = None
