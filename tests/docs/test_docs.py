"""Every code block of the docs runs: README.md, docs/*.md and docs/api/*.md (see harness.py for how).

Reference pages run in a scratch folder that mirrors this checkout (its files linked, so
`envs/echo_env` resolves and nothing is written into the checkout), with this checkout's .venv
on PATH and `envs/` importable. The README and the tutorial are journeys: they run in a fresh
copy of the checkout, with no venv, from `bash scripts/bootstrap` on, as a new user would.
Installs go where the reader's would (the machine's index and pip settings, nothing the tests add);
images build on the base image the SDK picks for this machine; servers bind 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from openenv.client.providers.process import free_port
from openenv.validation import checks
from tests.docs.harness import (
    DATA_LANGS,
    PYTHON_LANGS,
    SHELL_LANGS,
    TEXT_LANGS,
    Block,
    Page,
    Substitutions,
    page_run,
    parse_blocks,
)
from tests.support.checkout import copy_working_tree
from tests.support.servers import ROOT
from tests.support.systems import require_system

RUN_ID = uuid.uuid4().hex[:8]
JOURNEYS = ("README.md", "docs/tutorial.md")
_SKIP_REASON = re.compile(r"\b(internet|GPU)\b")


def _pages() -> list[str]:
    docs = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))
    return ["README.md", *docs]


REFERENCE = [p for p in _pages() if p not in JOURNEYS]


def _blocks(page: str) -> list[Block]:
    return parse_blocks((ROOT / page).read_text(), page)


# -- the blocks themselves ----------------------------------------------------------------------------


@pytest.mark.parametrize("page", _pages())
def test_every_block_has_a_language_the_tests_know(page: str) -> None:
    known = SHELL_LANGS | PYTHON_LANGS | DATA_LANGS | TEXT_LANGS
    for block in _blocks(page):
        assert block.lang, f"{block.where}: give the fence a language (```text for output and transcripts)"
        assert block.lang in known, (
            f"{block.where}: the docs tests cannot run a {block.lang!r} block (known: {sorted(known)})"
        )
        if block.directive == "skip":
            assert _SKIP_REASON.search(block.argument), (
                f"{block.where}: a block may be skipped only when it needs the internet or a GPU"
            )


def test_the_checks_table_lists_every_check_in_order() -> None:
    text = (ROOT / "docs" / "validate.md").read_text()
    rows = re.findall(r"^\| `([a-z_.]+)` \| (error|warning) \| (.+) \|$", text, re.M)
    assert [(cid, sev, title) for cid, sev, title in rows] == [(c.id, c.severity, c.title) for c in checks()]


# -- running pages ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docs_environ(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment every page starts from: the machine's own, as a reader's shell has it (its
    pip and uv settings, its index), with no venv, no Hub settings and no base image chosen by
    the tests; only this run's caches and labels, so that runs do not mix."""
    cache = tmp_path_factory.mktemp("docs-cache")
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "HF_", "HUGGING", "OPENENV_", "CONDA", "DOCKER_HOST")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p and "venv/bin" not in p
    )
    env.update(
        {
            "OPENENV_CACHE_DIR": str(cache),
            "OPENENV_LABELS": f"org.openenv.test-run=docs-{RUN_ID}",
            "OPENENV_NAME_PREFIX": f"docs-{RUN_ID}",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "NO_COLOR": "1",
            "GIT_TERMINAL_PROMPT": "0",
        }
    )
    return env


def _substitutions() -> Substitutions:
    names = {"my_env:dev": f"docs-my-env:{RUN_ID}", "echo-env:latest": f"docs-echo-env:{RUN_ID}"}
    return Substitutions(port_source=lambda: free_port("127.0.0.1"), names=names)


@pytest.fixture(scope="session")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose entries link to this checkout's: pages find its files, and write beside them."""
    folder = tmp_path_factory.mktemp("docs-mirror")
    for entry in ROOT.iterdir():
        if entry.name not in (".git",):
            (folder / entry.name).symlink_to(entry)
    return folder


def _cleanup(page: Page) -> None:
    """Stop what the page's clients started (by this run's label) and remove the images it named."""
    env = {
        **os.environ,
        "OPENENV_STATE_DIR": page.env.get("OPENENV_STATE_DIR", ""),
        "OPENENV_LABELS": page.env["OPENENV_LABELS"],
    }
    code = (
        "from openenv.client.providers import lifecycle; "
        f"lifecycle.gc(everything=True, labels={{'org.openenv.test-run': 'docs-{RUN_ID}'}})"
    )
    subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", code], env=env, capture_output=True, timeout=120)
    if shutil.which("docker"):
        for image in page.subs.names.values():
            if ":" not in image:
                continue
            running = subprocess.run(
                ["docker", "ps", "-aq", "--filter", f"ancestor={image}"], capture_output=True, text=True
            ).stdout.split()
            if running:
                subprocess.run(["docker", "rm", "-f", *running], capture_output=True, timeout=120)
            subprocess.run(["docker", "rmi", "-f", image], capture_output=True, timeout=120)


def _run_page(page: Page, scratch: Path) -> None:
    failures = []
    with contextlib.ExitStack() as stack:
        stack.callback(_cleanup, page)
        run = stack.enter_context(page_run(page, scratch, ROOT))
        blocks = run.blocks()
        for block in blocks:
            if (block.lang in TEXT_LANGS and block.directive is None) or block.directive == "skip":
                continue
            result = run.run(block)
            if not result.ok:
                failures.append(f"{block.where} ({block.lang}): {result.reason}\n{result.output[-6000:]}")
                if block.lang in SHELL_LANGS or block.lang in PYTHON_LANGS:
                    break  # later blocks build on this one
    assert not failures, "\n\n".join(failures) + "\n\n=== the page's log ===\n" + "\n".join(run.log)[-20000:]


_DOCKER = re.compile(r"^\s*(docker |openenv build )|from_docker_image|EnvPool\.docker", re.M)


def _needs_docker(page: str) -> bool:
    return any(_DOCKER.search(b.code) for b in _blocks(page) if b.directive is None)


def _docker_or_skip() -> None:
    if not os.environ.get("OPENENV_TEST_BASE_IMAGE"):
        require_system(
            "Docker",
            "OPENENV_TEST_BASE_IMAGE is not set: run `bash scripts/test`, which starts Docker and makes the base image",
        )


@pytest.mark.parametrize("name", REFERENCE)
def test_reference_page_runs(name: str, docs_environ: dict[str, str], mirror: Path, tmp_path: Path) -> None:
    if _needs_docker(name):
        _docker_or_skip()
    env = {
        **docs_environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{docs_environ['PATH']}",
        "VIRTUAL_ENV": str(ROOT / ".venv"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "envs"), str(ROOT)]),
        "OPENENV_STATE_DIR": str(tmp_path / "state"),
        "OPENENV_HUB_DATA_DIR": str(tmp_path / "hub"),
    }
    work = tmp_path / "work"
    shutil.copytree(mirror, work, symlinks=True)
    _run_page(Page(ROOT / name, name, work, env, _substitutions()), tmp_path)


# -- journeys: a fresh checkout, as a new user has it ------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of this working tree (tracked and new files, nothing git ignores) without a venv,
    in a folder of its own (the journeys work beside it). The README and the tutorial share it,
    so the venv the README's first block makes is reused."""
    return copy_working_tree(tmp_path_factory.mktemp("journey") / "openenv-hub")


def _journey(name: str, checkout: Path, docs_environ: dict[str, str], tmp_path: Path) -> None:
    env = {**docs_environ, "OPENENV_STATE_DIR": str(tmp_path / "state"), "OPENENV_HUB_DATA_DIR": str(tmp_path / "hub")}
    _run_page(Page(ROOT / name, name, checkout, env, _substitutions(), block_timeout_s=1800), tmp_path)


@pytest.mark.slow
@pytest.mark.timeout(900)  # a fresh venv and the Hub's pipeline: minutes, more on a busy machine
def test_the_readme_runs_in_a_fresh_checkout(
    fresh_checkout: Path, docs_environ: dict[str, str], tmp_path: Path
) -> None:
    _journey("README.md", fresh_checkout, docs_environ, tmp_path)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(900)  # builds, smoke tests and trust checks of its env: minutes, more on a busy machine
def test_the_tutorial_runs_in_a_fresh_checkout(
    fresh_checkout: Path, docs_environ: dict[str, str], tmp_path: Path
) -> None:
    _docker_or_skip()
    _journey("docs/tutorial.md", fresh_checkout, docs_environ, tmp_path)


def test_the_api_reference_is_generated_from_the_current_docstrings() -> None:
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "scripts" / "gen_api_docs.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    assert generator.stale() == [], "docs/api is out of date: run `bash scripts/gen-api-docs` and commit the pages"
    import openenv

    pages = "".join(p.read_text() for p in (ROOT / "docs" / "api").glob("*.md"))
    for name in openenv.__all__:
        assert f"## `{name}`" in pages, f"{name} has no entry in docs/api"
        assert (getattr(openenv, name).__doc__ or "").strip(), f"openenv.{name} has no docstring"


def test_the_protocol_page_names_every_frame_type_error_code_and_extension() -> None:
    from openenv.protocol import EXTENSIONS, ErrorCode, MsgType

    text = (ROOT / "docs" / "protocol.md").read_text()
    for frame in MsgType:
        assert f'"type": "{frame.value}"' in text, f"docs/protocol.md does not show a {frame.value!r} frame"
    for code in ErrorCode:
        assert re.search(rf"^\| `{code.value}`", text, re.M), f"docs/protocol.md's error table lacks {code.value}"
    for extension in EXTENSIONS:
        assert f"| `{extension}` |" in text, f"docs/protocol.md's extensions table lacks {extension}"


def test_the_hub_api_page_names_every_route(tmp_path: Path) -> None:
    from hub_service.app import create_app
    from hub_service.settings import HubSettings

    text = (ROOT / "docs" / "hub-api.md").read_text()
    paths = create_app(HubSettings(data_dir=tmp_path, local_source=None)).openapi()["paths"]
    undocumented = [p for p in paths if f"`GET {p}" not in text and f"`POST {p}" not in text and f" {p}" not in text]
    assert not undocumented, f"docs/hub-api.md does not describe {undocumented}"
