"""RFC 008's verdict decides a revision's, as the setting `rfc008_gate` says (docs/validate.md,
"When the report decides"): by default an env that declares a `validation:` block is held to it,
and a failed check of severity `fail` fails the stage that ran it, with the report kept and the
failing checks named; an env without the block is not (its report still says `fail`). `all` holds
every env; `off` keeps the report beside the Hub's verdict."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hub_service.indexer.service import index_source
from hub_service.indexer.sources import LocalSource
from hub_service.prbot.comment import ReportView, render
from hub_service.settings import HubSettings
from hub_service.worker import Worker
from tests.hub.test_pipeline import verdicts
from tests.support.servers import ROOT

pytestmark = [pytest.mark.slow]


def _echo(root: Path, name: str, *, reward_range: str | None = None, block: bool = True) -> None:
    """envs/echo_env as the env `name`: renamed where its files name it, with its declared reward
    range replaced, or with no `validation:` block."""
    folder = root / name
    shutil.copytree(ROOT / "envs" / "echo_env", folder, ignore=shutil.ignore_patterns("__pycache__"))
    edits = [
        ("openenv.yaml", "name: echo_env\n", f"name: {name}\n"),
        ("pyproject.toml", 'name = "echo_env"', f'name = "{name}"'),
        ("pyproject.toml", '"" = "echo_env"', f'"" = "{name}"'),
        ("Dockerfile", 'image.title="echo_env"', f'image.title="{name}"'),
    ]
    if reward_range:
        edits.append(("openenv.yaml", "range: [0.0, 100.0]", f"range: {reward_range}"))
    for file, text, replacement in edits:
        path = folder / file
        source = path.read_text()
        assert source.count(text) == 1, f"echo_env's {file} no longer has {text!r} once: mend the copy"
        path.write_text(source.replace(text, replacement))
    if not block:
        manifest = folder / "openenv.yaml"
        text = manifest.read_text()
        manifest.write_text(text[: text.index("validation:\n")])


def _run(root: Path, factory, settings: HubSettings) -> dict:
    index_source(factory, LocalSource(root, trusted=True))
    Worker(settings, factory).run_until_idle()
    return verdicts(factory)


def test_a_declared_check_that_fails_fails_the_revision_and_says_which(clean_factory, hub_settings) -> None:
    settings = hub_settings.model_copy(update={"builder": "process"})
    assert settings.rfc008_gate == "declared"  # the default
    root = Path(settings.local_source)
    # declares rewards up to 50; its oracle's 1,000-character message earns 100
    _echo(root, "narrow_echo", reward_range="[0.0, 50.0]")
    _echo(root, "plain_echo", block=False)  # declares nothing
    v = _run(root, clean_factory, settings)

    narrow = v["narrow_echo"]
    assert (narrow.state, narrow.failure_stage, narrow.smoke_status) == ("failed", "smoke", "failed")
    assert narrow.failure_reason.startswith("RFC 008: 1 check of severity fail failed: runtime.reward_well_formed: "), (
        narrow.failure_reason
    )
    assert "not a finite number in [0, 50]" in narrow.failure_reason
    # what the stage measured is kept: the report the bot and the site show, and the smoke figures
    statuses = {r["check_id"]: r["status"] for r in narrow.rfc008["results"]}
    assert narrow.rfc008["verdict"] == "fail" and statuses["runtime.reward_well_formed"] == "fail"
    assert statuses["runtime.startup"] == "pass" and narrow.cold_start_s is not None and narrow.cold_start_s > 0

    plain = v["plain_echo"]
    assert plain.state == "passed", plain.failure_reason
    plain_statuses = {r["check_id"]: r["status"] for r in plain.rfc008["results"]}
    assert plain.rfc008["verdict"] == "fail" and plain_statuses["static.manifest"] == "fail"


def test_all_holds_every_env_and_off_holds_none(clean_factory, hub_settings, tmp_path: Path) -> None:
    held = hub_settings.model_copy(update={"builder": "process", "rfc008_gate": "all"})
    root = Path(held.local_source)
    _echo(root, "plain_echo", block=False)
    v = _run(root, clean_factory, held)
    plain = v["plain_echo"]
    assert (plain.state, plain.failure_stage) == ("failed", "validate"), plain.failure_reason
    assert plain.failure_reason.startswith("RFC 008: 1 check of severity fail failed: static.manifest: ")
    assert plain.build_status is None  # nothing was built: the static level decided
    # the bot's comment: the validate stage failed, because of the check it names, and how to fix it
    comment = render(
        ReportView(
            repo_id="local/plain_echo",
            num=1,
            pr_status="open",
            sha=plain.sha,
            state=plain.state,
            report_url="http://127.0.0.1:7860/api/v1/envs/local/plain_echo",
            validation=plain.validation,
            validation_status=plain.validation_status,
            rfc008=plain.rfc008,
            build_status=plain.build_status,
            smoke_status=plain.smoke_status,
            failure_stage=plain.failure_stage,
            failure_reason=plain.failure_reason,
        )
    )
    assert "### ❌ OpenEnv checks failed" in comment and "| validate | ❌ failed |" in comment, comment
    assert "RFC 008: 1 check of severity fail failed: static.manifest" in comment
    assert "the RFC 008 checks below failed it" in comment and "| `static.manifest` | fail |" in comment, comment

    free = hub_settings.model_copy(
        update={"builder": "process", "rfc008_gate": "off", "local_source": str(tmp_path / "off")}
    )
    _echo(Path(free.local_source), "narrow_echo", reward_range="[0.0, 50.0]")
    narrow = _run(Path(free.local_source), clean_factory, free)["narrow_echo"]
    assert narrow.state == "passed", narrow.failure_reason
    assert narrow.rfc008["verdict"] == "fail"  # the report says so all the same
