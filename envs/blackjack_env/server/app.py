"""The ASGI app of the blackjack environment: `uvicorn server.app:app` from the env's folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import BlackjackAction, BlackjackObservation
    from .blackjack_environment import BlackjackEnvironment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import BlackjackAction, BlackjackObservation  # type: ignore[no-redef]
    from server.blackjack_environment import BlackjackEnvironment  # type: ignore[no-redef]

app = create_app(BlackjackEnvironment, BlackjackAction, BlackjackObservation, env_name="blackjack_env")


def main() -> None:
    """Serve on port 8000 (or $PORT)."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
