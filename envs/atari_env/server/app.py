"""The ASGI app of the Atari environment: `uvicorn server.app:app` from the env's folder."""

from __future__ import annotations

from openenv import create_app

try:
    from ..models import AtariAction, AtariObservation
    from .atari_environment import AtariEnvironment
except ImportError:  # run from the env's folder, where `server` is the top-level package
    from models import AtariAction, AtariObservation  # type: ignore[no-redef]
    from server.atari_environment import AtariEnvironment  # type: ignore[no-redef]

app = create_app(AtariEnvironment, AtariAction, AtariObservation, env_name="atari_env")


def main() -> None:
    """Serve on port 8000 (or $PORT)."""
    from openenv.server.run import serve

    serve(app)


if __name__ == "__main__":
    main()
