"""The ASGI app: `openenv serve .`, or `python -m openenv.server server.app:app` in this folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import __ENV_CLASS__Action, __ENV_CLASS__Observation
    from .environment import __ENV_CLASS__Environment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import __ENV_CLASS__Action, __ENV_CLASS__Observation  # type: ignore[no-redef]
    from server.environment import __ENV_CLASS__Environment  # type: ignore[no-redef]

app = create_app(__ENV_CLASS__Environment, __ENV_CLASS__Action, __ENV_CLASS__Observation, env_name="__ENV_NAME__")


def main() -> None:
    """Serve on 0.0.0.0:8000 (or $HOST:$PORT)."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
