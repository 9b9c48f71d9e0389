"""The ASGI app of the Wordle environment: `uvicorn server.app:app` from the env's folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import WordleAction, WordleObservation
    from .wordle_environment import WordleEnvironment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import WordleAction, WordleObservation  # type: ignore[no-redef]
    from server.wordle_environment import WordleEnvironment  # type: ignore[no-redef]

app = create_app(WordleEnvironment, WordleAction, WordleObservation, env_name="wordle_env")


def main() -> None:
    """Serve on port 8000 (or $PORT)."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
