"""The ASGI app of the echo environment: `uvicorn server.app:app` from the env's folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import EchoAction, EchoObservation
    from .echo_environment import EchoEnvironment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import EchoAction, EchoObservation  # type: ignore[no-redef]
    from server.echo_environment import EchoEnvironment  # type: ignore[no-redef]

app = create_app(EchoEnvironment, EchoAction, EchoObservation, env_name="echo_env")


def main() -> None:
    """Serve on port 8000 (or $PORT) with the fast transport settings."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
