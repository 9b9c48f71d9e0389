"""`python -m tests.support.hf_hub`: the stand-in Hugging Face Hub as a server of its own.

For trying the whole flow without an account (the tutorial does): `openenv push` publishes to
it, the Hub service indexes it, `pip install git+<Space URL>` and `from_hub` read from it, and its
OpenEnv Spaces run as local processes after each push, as Docker Spaces run on the Hub.

    python -m tests.support.hf_hub --port 8100 --token hf_tutorial &
    export HF_ENDPOINT=http://127.0.0.1:8100 HF_TOKEN=hf_tutorial
"""

from __future__ import annotations

import argparse
import logging
import signal
import tempfile
import threading
from pathlib import Path

import uvicorn

from tests.support.hf_hub import HubStandIn
from tests.support.hf_hub.runner import SpaceRunner


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.hf_hub", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8100, help="port on 127.0.0.1 (default 8100)")
    parser.add_argument("--data", type=Path, default=None, help="folder for its repos (default: a new temporary one)")
    parser.add_argument("--user", default="alice", help="the signed-in user (default alice)")
    parser.add_argument("--token", default=None, help="that user's token (default: a random one, printed)")
    parser.add_argument("--no-run", action="store_true", help="do not run Spaces (their runtime stays as seeded)")
    args = parser.parse_args(argv)

    data = args.data or Path(tempfile.mkdtemp(prefix="hf-hub-standin-"))
    hub = HubStandIn(data / "store", user=args.user)
    if args.token:
        del hub.state.users[hub.token]
        hub.token = hub.add_user(args.user, token=args.token, orgs=("openenv-org",))
    url = f"http://127.0.0.1:{args.port}"
    hub.url = hub.state.endpoint = url
    runner = None if args.no_run else SpaceRunner(hub, data / "spaces")
    logging.basicConfig(level=logging.INFO, format="hf-hub stand-in: %(message)s")
    server = uvicorn.Server(uvicorn.Config(hub.app, host="127.0.0.1", port=args.port, log_level="warning"))
    signal.signal(signal.SIGTERM, lambda *_: setattr(server, "should_exit", True))
    if runner is not None:
        runner.start()

    def _announce() -> None:
        while not server.started and not server.should_exit:
            threading.Event().wait(0.02)
        print(f"Hugging Face Hub stand-in on {url} (user {args.user}, data in {data})", flush=True)
        print(f"export HF_ENDPOINT={url} HF_TOKEN={hub.token}", flush=True)

    threading.Thread(target=_announce, daemon=True).start()
    try:
        server.run()
    finally:
        if runner is not None:
            runner.stop()


if __name__ == "__main__":
    main()
