"""The console `openenv hub serve --log-file` prints for people (hub_service/console.py): one line
per verdict as it lands, a summary with the URL once every env has one, library chatter in the file.
The whole main command's console is asserted in tests/e2e/test_main_command.py."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from hub_service.console import Verdict, VerdictWatcher, setup_console_logging
from hub_service.settings import HubSettings

URL = "http://127.0.0.1:7860"


def _watcher(tmp_path: Path) -> VerdictWatcher:
    return VerdictWatcher(HubSettings(data_dir=tmp_path), URL, print)


def test_each_verdict_is_printed_once_as_it_lands_then_the_summary(tmp_path: Path) -> None:
    watcher = _watcher(tmp_path)
    echo_running = Verdict("local/echo_env", "running", None, None, None)
    chess_waits = Verdict("local/chess_env", "waiting", None, None, "no Docker engine answers at unix:///x.sock")
    assert watcher.report([echo_running, chess_waits]) == [
        "… local/chess_env waiting: no Docker engine answers at unix:///x.sock"
    ]
    assert watcher.report([echo_running, chess_waits]) == []  # nothing new: nothing printed
    echo_passed = Verdict("local/echo_env", "passed", 14.4, None, None)
    assert watcher.report([echo_passed, chess_waits]) == [
        "✓ local/echo_env passed in 14 s",
        f"2 envs checked: 1 passed, 1 waiting for the infrastructure. The Hub is at {URL} (Ctrl-C stops it)",
    ]
    chess_failed = Verdict("local/chess_env", "failed", None, "build", "RUN pip install   failed:\nno such package")
    assert watcher.report([echo_passed, chess_failed]) == [
        "✗ local/chess_env failed at build: RUN pip install failed: no such package",
        f"2 envs checked: 1 passed, 1 failed. The Hub is at {URL} (Ctrl-C stops it)",
    ]
    chess_passed = Verdict("local/chess_env", "passed", 3.0, None, None)
    assert watcher.report([echo_passed, chess_passed]) == [
        "✓ local/chess_env passed in 3 s",
        f"All 2 envs passed. The Hub is at {URL} (Ctrl-C stops it)",
    ]


def test_a_wait_for_the_hosts_set_up_says_it_is_the_operators_to_fix(tmp_path: Path) -> None:
    host = Verdict("local/echo_env", "waiting", None, "host_setup", "the container engine has no runtime 'runsc'")
    assert _watcher(tmp_path).report([host])[0] == (
        "… local/echo_env waits for this host's set-up (the operator's to fix; it runs once fixed): "
        "the container engine has no runtime 'runsc'"
    )


def test_library_chatter_goes_to_the_file_warnings_to_the_terminal(tmp_path: Path) -> None:
    terminal = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_console_logging(tmp_path / "logs" / "serve.log", level="info", verbose=False, stream=terminal)
        logging.getLogger("picows.openenv.client.9").info("WS connection established")
        logging.getLogger("alembic.runtime.migration").info("Running upgrade 0010 -> 0011")
        logging.getLogger("hub_service.limits").warning("rate limits: the database did not answer")
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:], root.level = saved
        logging.captureWarnings(False)
    assert terminal.getvalue() == "WARNING hub_service.limits: rate limits: the database did not answer\n"
    full = (tmp_path / "logs" / "serve.log").read_text()
    assert "WS connection established" in full and "Running upgrade 0010 -> 0011" in full
    assert "the database did not answer" in full
