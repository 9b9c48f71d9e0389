"""The ASGI app of the coding environment: `uvicorn server.app:app` from the env's folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import CodeAction, CodeObservation
    from .coding_environment import CodingEnvironment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import CodeAction, CodeObservation  # type: ignore[no-redef]
    from server.coding_environment import CodingEnvironment  # type: ignore[no-redef]

app = create_app(CodingEnvironment, CodeAction, CodeObservation, env_name="coding_env")


def main() -> None:
    """Serve on port 8000 (or $PORT)."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
