"""Commands that other packages add to `openenv` through the `openenv.cli` entry-point group: the
Hub's `openenv hub` lives in `hub_service.cli`, which the SDK finds in the installed metadata and
never imports by name (tests/test_import_rules.py keeps it so)."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from openenv.cli import main as cli_main
from tests.support.cli import Run
from tests.support.servers import ROOT


def test_the_hub_command_is_an_entry_point_of_the_installed_distribution() -> None:
    found = {ep.name: ep.value for ep in entry_points(group=cli_main.ENTRY_POINT_GROUP)}
    assert found.get("hub") == "hub_service.cli", (
        f"{found}: the editable install predates pyproject.toml's entry points; rerun scripts/bootstrap"
    )
    assert set(cli_main.PLUGINS) <= set(found)


def test_top_level_help_lists_the_hub_without_importing_it() -> None:
    code = (
        "import sys; from openenv.cli.main import main; rc = main(['--help']); "
        "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] == 'hub_service' or m == 'importlib.metadata'))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    summary, _ = cli_main.PLUGINS["hub"]
    assert any(line.split() == ["hub", *summary.split()] for line in proc.stdout.splitlines()), proc.stdout
    assert "LOADED []" in proc.stdout


def test_a_plugin_command_that_is_not_installed_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli_main.PLUGINS, "galaxy", ("run a galaxy", "pip install 'openenv-galaxy'"))
    assert cli_main.main(["galaxy", "serve"]) == 1
    assert capsys.readouterr().err.strip() == "error: `openenv galaxy` is not installed — pip install 'openenv-galaxy'"


def test_the_hub_without_the_service_extra_says_what_to_install(run_cli: Run) -> None:
    # As if SQLAlchemy were not installed: the name maps to None, so find_spec and import both fail.
    code = (
        "import sys; sys.modules['sqlalchemy'] = None; from openenv.cli.main import main; "
        "sys.exit(main(['hub', 'index', '--source', 'local']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == (
        "error: the Hub service needs the service extra (sqlalchemy not installed) — pip install 'openenv-hub[service]'"
    )


def test_unknown_commands_suggest_plugin_commands_too(run_cli: Run) -> None:
    proc = run_cli("hbu")
    assert proc.returncode == 2 and proc.stderr.strip() == "error: unknown command 'hbu' — did you mean `openenv hub`?"
