"""The ASGI app of the chess environment: `uvicorn server.app:app` from the env's folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import ChessAction, ChessObservation
    from .chess_environment import ChessEnvironment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import ChessAction, ChessObservation  # type: ignore[no-redef]
    from server.chess_environment import ChessEnvironment  # type: ignore[no-redef]

app = create_app(ChessEnvironment, ChessAction, ChessObservation, env_name="chess_env")


def main() -> None:
    """Serve on port 8000 (or $PORT)."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
