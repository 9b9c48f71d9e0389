"""`python -m openenv.cli ...`: the same as the `openenv` command."""

from __future__ import annotations

import sys

from openenv.cli.main import main

sys.exit(main())
