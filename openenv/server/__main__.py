"""`python -m openenv.server server.app:app [--host H] [--port P]`: what env images run."""

from __future__ import annotations

import argparse

from openenv.server.run import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m openenv.server", description="Serve an OpenEnv app with uvicorn.")
    parser.add_argument("app", help='import string of the ASGI app, e.g. "server.app:app"')
    parser.add_argument("--host", default=None, help="interface to bind (default $HOST or 0.0.0.0)")
    parser.add_argument("--port", type=int, default=None, help="port (default $PORT or 8000)")
    parser.add_argument("--reload", action="store_true", help="restart on code changes")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    serve(args.app, host=args.host, port=args.port, reload=args.reload, log_level=args.log_level, app_dir=".")


if __name__ == "__main__":
    main()
