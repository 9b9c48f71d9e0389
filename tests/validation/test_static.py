"""Static checks: a corpus of broken env folders, each caught by the right check id."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from openenv.validation import checks, validate_folder
from tests.support.servers import ROOT


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _yaml(env: Path, old: str, new: str) -> None:
    _edit(env / "openenv.yaml", old, new)


# name -> (mutation, check id, expected status, file, line). Line None: not asserted.
BROKEN: dict[str, tuple[Callable[[Path], None], str, str, str | None, int | None]] = {
    "yaml syntax": (lambda e: _yaml(e, "port: 8000", "port: [8000"), "manifest.syntax", "fail", "openenv.yaml", 7),
    "not a mapping": (
        lambda e: (e / "openenv.yaml").write_text("- just\n- a list\n"),
        "manifest.syntax",
        "fail",
        "openenv.yaml",
        1,
    ),
    "duplicate key": (
        lambda e: _yaml(e, "port: 8000", "port: 8000\nport: 9000"),
        "manifest.duplicate_key",
        "fail",
        "openenv.yaml",
        7,
    ),
    "bad port": (lambda e: _yaml(e, "port: 8000", "port: 99999"), "manifest.schema", "fail", "openenv.yaml", 6),
    "bad name": (lambda e: _yaml(e, "name: good_env", "name: good env"), "manifest.schema", "fail", "openenv.yaml", 2),
    "missing name": (lambda e: _yaml(e, "name: good_env\n", ""), "manifest.schema", "fail", "openenv.yaml", 1),
    "bad app string": (
        lambda e: _yaml(e, "app: server.app:app", "app: server/app.py"),
        "manifest.schema",
        "fail",
        "openenv.yaml",
        5,
    ),
    "bad type": (lambda e: _yaml(e, "type: space", "type: website"), "manifest.schema", "fail", "openenv.yaml", 3),
    "misspelled key": (lambda e: _yaml(e, "tags:", "tgas:"), "manifest.keys", "warn", "openenv.yaml", 9),
    "no spec_version": (
        lambda e: _yaml(e, "spec_version: 1\n", ""),
        "manifest.spec_version",
        "warn",
        "openenv.yaml",
        1,
    ),
    "name differs from folder": (
        lambda e: _yaml(e, "name: good_env", "name: other_env"),
        "manifest.name",
        "warn",
        "openenv.yaml",
        2,
    ),
    "app module missing": (
        lambda e: _yaml(e, "app: server.app:app", "app: server.nope:app"),
        "app.module",
        "fail",
        "openenv.yaml",
        5,
    ),
    "app attribute missing": (
        lambda e: _yaml(e, "app: server.app:app", "app: server.app:application"),
        "app.object",
        "fail",
        "openenv.yaml",
        5,
    ),
    "app attribute not an app": (
        lambda e: _yaml(e, "app: server.app:app", "app: server.app:__doc__"),
        "app.object",
        "fail",
        "openenv.yaml",
        5,
    ),
    "syntax error in the env": (
        lambda e: _edit(e / "server" / "environment.py", "LOW, HIGH = 1, 100", "LOW, HIGH = (1, 100"),
        "app.import",
        "fail",
        "server/environment.py",
        None,
    ),
    "env raises at import": (
        lambda e: _edit(e / "server" / "environment.py", "MAX_GUESSES = 7", "MAX_GUESSES = 7 // 0"),
        "app.import",
        "fail",
        "server/environment.py",
        17,
    ),
    "undeclared dependency not installed": (
        lambda e: _edit(
            e / "server" / "environment.py", "import random\n", "import random\n\nimport nonexistent_dep_xyz\n"
        ),
        "app.import",
        "warn",
        "server/environment.py",
        None,
    ),
    "no Dockerfile": (lambda e: (e / "Dockerfile").unlink(), "dockerfile.present", "fail", None, None),
    "Dockerfile only in server/": (
        lambda e: (e / "Dockerfile").rename(e / "server" / "Dockerfile"),
        "dockerfile.present",
        "warn",
        "server/Dockerfile",
        None,
    ),
    "Dockerfile exposes another port": (
        lambda e: _edit(e / "Dockerfile", "EXPOSE 8000", "EXPOSE 7860"),
        "dockerfile.port",
        "warn",
        "Dockerfile",
        19,
    ),
    "no README": (lambda e: (e / "README.md").unlink(), "readme.front_matter", "fail", None, None),
    "README without front matter": (
        lambda e: (e / "README.md").write_text("# hello\n"),
        "readme.front_matter",
        "fail",
        "README.md",
        1,
    ),
    "front matter not closed": (
        lambda e: _edit(e / "README.md", "tags:\n  - openenv\n---", "tags:\n  - openenv\n"),
        "readme.front_matter",
        "fail",
        "README.md",
        1,
    ),
    "gradio Space": (
        lambda e: _edit(e / "README.md", "sdk: docker", "sdk: gradio"),
        "readme.sdk",
        "fail",
        "README.md",
        7,
    ),
    "app_port disagrees": (
        lambda e: _edit(e / "README.md", "app_port: 8000", "app_port: 8001"),
        "readme.app_port",
        "fail",
        "README.md",
        8,
    ),
    "no app_port": (
        lambda e: _edit(e / "README.md", "app_port: 8000\n", ""),
        "readme.app_port",
        "fail",
        "README.md",
        None,
    ),
    "not tagged openenv": (
        lambda e: _edit(e / "README.md", "  - openenv\n", "  - games\n"),
        "readme.tag",
        "warn",
        "README.md",
        10,
    ),
    "no dependency files": (
        lambda e: [(e / "pyproject.toml").unlink(), (e / "server" / "requirements.txt").unlink()],
        "deps.declared",
        "warn",
        None,
        None,
    ),
    "SDK not declared": (
        lambda e: [(e / "pyproject.toml").unlink(), _edit(e / "Dockerfile", '"${OPENENV_SDK}" ', "")],
        "deps.sdk",
        "warn",
        None,
        None,
    ),
    "import not declared": (
        lambda e: _edit(
            e / "server" / "environment.py",
            "import uuid\n",
            "import uuid\n\nimport yaml_extra_thing_xyz as _x  # noqa\n",
        ),
        "deps.imports",
        "warn",
        "server/environment.py",
        8,
    ),
    "no pyproject": (lambda e: (e / "pyproject.toml").unlink(), "package.pyproject", "warn", None, None),
    "pyproject not TOML": (
        lambda e: _edit(e / "pyproject.toml", 'version = "0.1.0"', "version = 0.1.0 oops"),
        "package.pyproject",
        "warn",
        "pyproject.toml",
        11,
    ),
    "package named otherwise": (
        lambda e: _edit(e / "pyproject.toml", 'name = "good_env"', 'name = "openenv-tools"'),
        "package.pyproject",
        "warn",
        "pyproject.toml",
        10,
    ),
    "no build-system": (
        lambda e: _edit(e / "pyproject.toml", 'build-backend = "hatchling.build"', ""),
        "package.pyproject",
        "warn",
        "pyproject.toml",
        None,
    ),
    "folder not mapped to the package": (
        lambda e: _edit(e / "pyproject.toml", '"" = "good_env"', '"" = "src"'),
        "package.layout",
        "warn",
        "pyproject.toml",
        None,
    ),
    "no __init__.py": (lambda e: (e / "__init__.py").unlink(), "package.layout", "warn", None, None),
    "client not exported": (
        lambda e: _edit(e / "__init__.py", "from .client import GoodEnv\n", ""),
        "package.client",
        "warn",
        "__init__.py",
        None,
    ),
    "models not exported": (
        lambda e: _edit(
            e / "__init__.py",
            "from .models import GoodAction, GoodObservation, GoodState",
            "from .models import GoodAction",
        ),
        "package.client",
        "warn",
        "__init__.py",
        None,
    ),
    "client not typed": (
        lambda e: _edit(e / "client.py", "(EnvClient[GoodAction, GoodObservation, GoodState])", "(object)"),
        "package.client",
        "warn",
        "client.py",
        None,
    ),
    "server deps required by the client": (
        lambda e: _edit(
            e / "pyproject.toml",
            'dependencies = ["openenv-hub>=0.1.0"]',
            'dependencies = ["openenv-hub[server]>=0.1.0", "fastapi"]',
        ),
        "package.server_extra",
        "warn",
        "pyproject.toml",
        14,
    ),
    "no server extra": (
        lambda e: _edit(e / "pyproject.toml", 'server = ["openenv-hub[server]>=0.1.0"]\n', ""),
        "package.server_extra",
        "warn",
        "pyproject.toml",
        None,
    ),
    "server extra lacks a requirement": (
        lambda e: (e / "server" / "requirements.txt").write_text("numpy>=1.26\n"),
        "package.server_extra",
        "warn",
        "pyproject.toml",
        None,
    ),
}


# What `openenv push` writes itself is only a warning on a source folder (tests/validation/test_upstream_shapes.py):
# these are caught as the Hub sees them, in the Space's files.
AS_A_SPACE = {"Dockerfile only in server/", "no README", "README without front matter", "no app_port"}


@pytest.mark.parametrize(("mutate", "check_id", "status", "file", "line"), BROKEN.values(), ids=BROKEN.keys())
def test_each_broken_env_is_caught_by_its_check(
    request: pytest.FixtureRequest, make_env, mutate, check_id: str, status: str, file: str | None, line: int | None
) -> None:
    env = make_env("good_env")
    mutate(env)
    space_id = "someone/good_env" if request.node.callspec.id in AS_A_SPACE else None
    report = validate_folder(
        env, space_id=space_id, import_app=check_id.startswith("app.") or "dependency not installed" in check_id
    )
    hits = [c for c in report.results(check_id) if c.status == status]
    assert hits, [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"]
    hit = hits[0]
    assert hit.message and (hit.remediation or status == "pass")
    if file is not None:
        assert hit.file == file
    if line is not None:
        assert hit.line == line, hit
    expected_exit = 1 if status == "fail" else 0
    assert report.exit_code == expected_exit, [(c.id, c.status, c.message) for c in report.problems()]
    assert report.status == ("fail" if status == "fail" else "warn")


def test_the_template_and_echo_env_pass_strictly(make_env) -> None:
    for folder in (make_env("fresh_env"), ROOT / "envs" / "echo_env"):
        report = validate_folder(folder, strict=True)
        assert report.status == "pass", [(c.id, c.message) for c in report.problems()]
        assert report.summary.failed == report.summary.warned == report.summary.skipped == 0
        assert {c.id for c in report.checks} == {c.id for c in checks("static")}


def test_strict_turns_a_warning_into_a_failure(make_env) -> None:
    env = make_env("good_env")
    _edit(env / "README.md", "  - openenv\n", "  - games\n")
    assert validate_folder(env, import_app=False).exit_code == 0
    strict = validate_folder(env, import_app=False, strict=True)
    assert (strict.status, strict.exit_code) == ("fail", 1)


def test_a_folder_without_a_manifest_is_not_an_env(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM python\n")
    report = validate_folder(tmp_path)
    assert (report.status, report.exit_code) == ("unsupported", 2)
    assert report.results("manifest.present")[0].status == "fail"
    assert all(c.status == "skip" for c in report.checks if c.id != "manifest.present")
    (tmp_path / "openenv.yml").write_text("name: x\n")
    assert "rename openenv.yml" in (validate_folder(tmp_path).results("manifest.present")[0].remediation or "")
    assert validate_folder(tmp_path / "missing").exit_code == 2


def test_a_newer_spec_version_is_unsupported(make_env) -> None:
    env = make_env("good_env")
    _yaml(env, "spec_version: 1", "spec_version: 3")
    report = validate_folder(env)
    assert (report.status, report.exit_code) == ("unsupported", 2)
    assert "newer than this openenv" in (report.unsupported_reason or "")


def _upstream_style_space(root: Path) -> Path:
    """A Space laid out like upstream's envs today: monorepo app path, upstream SDK imports,
    server/Dockerfile, no pyproject, README without the openenv tag, no spec_version."""
    env = root / "legacy_env"
    (env / "server").mkdir(parents=True)
    (env / "openenv.yaml").write_text(
        'name: legacy_env\nversion: "0.1.0"\ndescription: old\napp: envs.legacy_env.server.app:app\nport: 8000\n'
        "action: LegacyAction\nobservation: LegacyObservation\n"
    )
    (env / "server" / "__init__.py").write_text("")
    (env / "server" / "app.py").write_text("from openenv.core.env_server import create_app\n\napp = create_app()\n")
    (env / "server" / "requirements.txt").write_text("openenv-core>=0.2\n")
    (env / "server" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY . /app\nRUN pip install -r server/requirements.txt\nEXPOSE 8000\n"
        'CMD ["uvicorn", "server.app:app", "--host", "0.0.0.0", "--port", "8000"]\n'
    )
    (env / "README.md").write_text("---\ntitle: Legacy\nsdk: docker\napp_port: 8000\n---\n# Legacy\n")
    return env


def test_a_space_in_todays_upstream_shape_gets_warnings_not_failures(tmp_path: Path) -> None:
    report = validate_folder(_upstream_style_space(tmp_path), space_id="someone/legacy-env")
    assert report.status == "warn" and report.exit_code == 0, [(c.id, c.message) for c in report.problems()]
    warned = {c.id for c in report.checks if c.status == "warn"}
    assert {"manifest.spec_version", "app.module", "dockerfile.present", "readme.tag", "package.pyproject"} <= warned
    assert report.results("manifest.name")[0].status == "pass"  # "legacy_env" is the Space "legacy-env"
    import_result = report.results("app.import")[0]
    assert import_result.status == "skip" and "upstream openenv-core" in import_result.message


def test_the_report_is_a_versioned_json_document(make_env) -> None:
    report = validate_folder(make_env("good_env"))
    doc = report.model_dump(mode="json")
    assert doc["report_version"] == 1 and doc["status"] == "pass" and doc["exit_code"] == 0
    assert doc["manifest"]["name"] == "good_env" and doc["target"]["name"] == "good_env"
    assert {"id", "title", "status", "severity", "message", "remediation", "file", "line", "details"} <= set(
        doc["checks"][0]
    )


def test_the_import_check_does_not_touch_this_process(make_env) -> None:
    import sys

    env = make_env("good_env")
    _edit(
        env / "server" / "app.py", "app = create_app(", "import sys\nsys.modules['openenv'] = None\napp = create_app("
    )
    before = set(sys.modules)
    assert validate_folder(env).results("app.import")[0].status == "pass"
    assert "server.environment" not in sys.modules and set(sys.modules) - before <= {
        m for m in sys.modules if m.startswith("openenv")
    }


def test_a_shutil_copy_of_echo_env_validates_against_its_folder_name(tmp_path: Path) -> None:
    copy = tmp_path / "renamed_env"
    shutil.copytree(ROOT / "envs" / "echo_env", copy, ignore=shutil.ignore_patterns("__pycache__"))
    result = validate_folder(copy, import_app=False).results("manifest.name")[0]
    assert result.status == "warn" and "'echo_env'" in result.message and "'renamed_env'" in result.message


@pytest.mark.parametrize("env", sorted(p.parent.name for p in (ROOT / "envs").glob("*/openenv.yaml")))
def test_every_reference_env_passes_validate_strictly(env: str) -> None:
    report = validate_folder(ROOT / "envs" / env, strict=True)
    assert report.status == "pass", [(c.id, c.status, c.message) for c in report.problems()]


def test_lazy_optional_and_type_only_imports_need_no_declaration(make_env) -> None:
    env = make_env("good_env")
    _edit(
        env / "server" / "environment.py",
        "import uuid\n",
        "import uuid\nfrom typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    import typing_only_xyz\ntry:\n    import optional_xyz\nexcept ImportError:\n    optional_xyz = None\n\n\n"
        "def _lazy():\n    import lazy_xyz\n\n    return lazy_xyz\n",
    )
    result = validate_folder(env, import_app=False).results("deps.imports")
    assert [r.status for r in result] == ["pass"], result


def test_an_upstream_style_pyproject_passes_the_package_checks(tmp_path: Path) -> None:
    env = _upstream_style_space(tmp_path)
    (env / "__init__.py").write_text(
        "from .client import LegacyEnv\nfrom .models import LegacyAction, LegacyObservation\n"
    )
    (env / "models.py").write_text(
        "from openenv.core.env_server.types import Action, Observation\n\n\nclass LegacyAction(Action):\n    x: int\n\n\n"
        "class LegacyObservation(Observation):\n    y: int\n"
    )
    (env / "client.py").write_text(
        "from openenv.core.env_client import EnvClient\n\nfrom .models import LegacyAction, LegacyObservation\n\n\n"
        "class LegacyEnv(EnvClient[LegacyAction, LegacyObservation]):\n    pass\n"
    )
    (env / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=45"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "openenv-legacy-env"\nversion = "0.1.0"\n'
        'dependencies = ["openenv-core[core]>=0.2.2", "fastapi>=0.115", "uvicorn>=0.24"]\n\n'
        '[tool.setuptools]\npackages = ["legacy_env", "legacy_env.server"]\npackage-dir = { "legacy_env" = ".", "legacy_env.server" = "server" }\n'
    )
    report = validate_folder(env, space_id="someone/legacy_env", import_app=False)
    assert report.exit_code == 0, [(c.id, c.message) for c in report.problems()]
    status = {c.id: c.status for c in report.checks}
    assert status["package.layout"] == "pass"  # setuptools maps the folder to the package
    assert status["package.pyproject"] == "pass"  # "openenv-legacy-env" is upstream's name for the package legacy_env
    extra = report.results("package.server_extra")  # upstream's SDK is one install: nothing to split out
    assert [r.status for r in extra] == ["pass"] and "openenv-core[core]" in extra[0].message
    client = report.results("package.client")[0]  # upstream's clients are typed by action and observation
    assert client.status == "pass" and "LegacyEnv(EnvClient[LegacyAction, LegacyObservation])" in client.message
