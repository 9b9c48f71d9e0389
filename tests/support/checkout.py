"""Copies of this working tree as a user gets it: its tracked and new files, nothing git ignores
(no .venv, no caches), optionally as a git repository of their own, and that repository served
over HTTP on 127.0.0.1 (git's plain HTTP protocol), a stand-in for the project's git URL."""

from __future__ import annotations

import contextlib
import functools
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.servers import ROOT

__all__ = ["copy_working_tree", "served_git_repo"]


def copy_working_tree(dest: Path, *, as_git: bool = False) -> Path:
    """Copy the working tree to `dest`; with `as_git`, commit it there as one commit. Returns `dest`."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        source = ROOT / rel
        if source.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    if as_git:
        git = ["git", "-c", "user.name=tests", "-c", "user.email=tests@127.0.0.1", "-c", "init.defaultBranch=main"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "snapshot of the working tree"]):
            subprocess.run([*git, *args], cwd=dest, check=True, capture_output=True, timeout=120)
    return dest


@contextlib.contextmanager
def served_git_repo(workdir: Path, name: str = "openenv-hub") -> Iterator[str]:
    """A git copy of the working tree served read-only at http://127.0.0.1:PORT/<name>.git; yields that URL."""
    repo = copy_working_tree(workdir / "work" / name, as_git=True)
    bare = workdir / "srv" / f"{name}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True, capture_output=True, timeout=300)
    subprocess.run(["git", "update-server-info"], cwd=bare, check=True, capture_output=True, timeout=120)

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(bare.parent)))
    thread = threading.Thread(target=server.serve_forever, name="git-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{name}.git"
    finally:
        server.shutdown()
        server.server_close()
