"""The ASGI app of the grid world: `uvicorn server.app:app` from the env's folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import GridAction, GridObservation
    from .grid_environment import GridWorldEnvironment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import GridAction, GridObservation  # type: ignore[no-redef]
    from server.grid_environment import GridWorldEnvironment  # type: ignore[no-redef]

app = create_app(GridWorldEnvironment, GridAction, GridObservation, env_name="grid_world_env")


def main() -> None:
    """Serve on port 8000 (or $PORT)."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
