"""Upstream OpenEnv's own layouts (tests/fixtures/upstream) validate as they are; what is really
wrong with them is still caught. Each fixture is a real env folder written against upstream's SDK;
`_on_our_sdk` makes a copy importable here, where upstream's `openenv.core` is not installed."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from openenv.validation import CheckResult, Report, validate, validate_folder
from tests.support.servers import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "upstream"
SHAPES = sorted(p.name for p in FIXTURES.iterdir() if (p / "openenv.yaml").is_file())
# What a user should still be told about each shape as a source folder (everything else passes).
WARNED = {"no_front_matter_env": ["readme.front_matter"]}


def _copy(tmp_path: Path, shape: str, folder: str | None = None) -> Path:
    dest = tmp_path / (folder or shape)
    shutil.copytree(FIXTURES / shape, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _on_our_sdk(env: Path) -> Path:
    """Point the env's imports of upstream's SDK (`openenv.core...`) at ours: the names it uses
    (Action, Observation, State, Environment, create_app, EnvClient, StepResult) are the same."""
    for path in env.rglob("*.py"):
        path.write_text(re.sub(r"from openenv\.core(\.[\w.]+)? import", "from openenv import", path.read_text()))
    return env


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _seen(report: Report) -> list[tuple[str, str, str]]:
    return [(c.id, c.status, c.message) for c in report.checks if c.status != "pass"]


def _one(report: Report, check_id: str) -> CheckResult:
    results = report.results(check_id)
    assert len(results) == 1, results
    return results[0]


# -- every shape as it is -------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
def test_each_upstream_shape_has_no_failures_and_only_its_real_warnings(shape: str) -> None:
    report = validate_folder(FIXTURES / shape)
    assert report.summary.failed == 0 and report.exit_code == 0, _seen(report)
    assert [c.id for c in report.checks if c.status == "warn"] == WARNED.get(shape, []), _seen(report)
    app_import = _one(report, "app.import")  # upstream's SDK is not installed here: not the env's fault
    assert app_import.status == "skip" and "upstream openenv-core" in app_import.message


def test_the_readme_lists_every_fixture() -> None:
    listed = re.findall(r"^\| `(\w+)` \|", (FIXTURES / "README.md").read_text(), flags=re.MULTILINE)
    assert sorted(listed) == SHAPES and len(SHAPES) == 12


# -- where the Dockerfile lives -------------------------------------------------------------------------


def test_server_dockerfile_is_the_source_layout_and_a_root_one_is_the_spaces() -> None:
    source = _one(validate_folder(FIXTURES / "template_env", import_app=False), "dockerfile.present")
    assert (source.status, source.file) == ("pass", "server/Dockerfile") and "openenv push" in source.message
    as_space = _one(
        validate_folder(FIXTURES / "template_env", space_id="someone/template_env", import_app=False),
        "dockerfile.present",
    )
    assert (as_space.status, as_space.file) == ("warn", "server/Dockerfile")
    pushed = validate_folder(FIXTURES / "pushed_env", space_id="someone/pushed_env", import_app=False)
    assert pushed.status == "pass", _seen(pushed)
    assert _one(pushed, "dockerfile.present").file == "Dockerfile"


# -- importing the app the way its Dockerfile runs it ---------------------------------------------------------


def test_a_plain_app_imports_plainly(tmp_path: Path) -> None:
    report = validate_folder(_on_our_sdk(_copy(tmp_path, "template_env")))
    result = _one(report, "app.import")
    assert (
        result.status == "pass"
        and result.details["import_mode"] == "plain"
        and result.details["module"] == "server.app"
    )
    assert report.status == "pass", _seen(report)


def test_an_app_with_relative_imports_only_imports_as_its_package(tmp_path: Path) -> None:
    env = _on_our_sdk(_copy(tmp_path, "package_env"))
    before = sorted(p.relative_to(env) for p in env.rglob("*"))
    report = validate_folder(env)
    assert report.status == "pass", _seen(report)
    module = _one(report, "app.module")
    assert module.status == "pass" and module.details["package"] == "package_env"
    result = _one(report, "app.import")
    assert result.status == "pass" and "as the package package_env" in result.message
    assert result.details == {
        "app_type": result.details["app_type"],
        "import_mode": "package",
        "module": "package_env.server.app",
    }
    assert _one(report, "app.object").status == "pass"
    assert sorted(p.relative_to(env) for p in env.rglob("*")) == before  # registered under its name, never copied


def test_the_package_name_comes_from_the_pyproject_when_the_manifest_gives_none(tmp_path: Path) -> None:
    env = _on_our_sdk(_copy(tmp_path, "package_env", folder="date-hunt"))  # a folder name that is no identifier
    _edit(env / "openenv.yaml", "app: package_env.server.app:app", "app: server.app:app")
    result = _one(validate_folder(env), "app.import")
    assert result.status == "pass" and result.details["module"] == "package_env.server.app", result


def test_an_app_served_locally_runs_as_its_package(tmp_path: Path) -> None:
    report = validate(_on_our_sdk(_copy(tmp_path, "package_env")), run=True, latency_steps=2)
    assert report.exit_code == 0, _seen(report)
    assert _one(report, "runtime.starts").status == "pass" and _one(report, "runtime.step").status == "pass"


def test_a_relative_import_that_fails_as_a_package_too_is_a_failure(tmp_path: Path) -> None:
    env = _on_our_sdk(_copy(tmp_path, "package_env"))
    _edit(
        env / "server" / "app.py",
        "from .hunt_environment import",
        "from ...elsewhere import nothing  # noqa\nfrom .hunt_environment import",
    )
    report = validate_folder(env)
    result = _one(report, "app.import")
    assert (
        result.status == "fail" and "relative import" in result.message and result.details["import_mode"] == "package"
    )
    assert (result.file, result.line) == ("server/app.py", 6)
    assert report.exit_code == 1


# -- "not installed here" or "broken": the exception chain decides ---------------------------------------------


def test_a_dependency_wrapped_in_another_import_error_is_not_installed_here(tmp_path: Path) -> None:
    report = validate_folder(_on_our_sdk(_copy(tmp_path, "wrapped_dep_env")))
    result = _one(report, "app.import")
    assert result.status == "warn" and result.details["missing_module"] == "some_missing_module_xyz", result
    assert "not installed in this Python" in result.message and "pip install some-missing-module-xyz" in result.message
    assert (result.file, result.line) == ("server/rules.py", 6)
    assert report.exit_code == 0


def test_a_missing_module_of_the_env_itself_is_a_failure_even_when_wrapped(tmp_path: Path) -> None:
    env = _on_our_sdk(_copy(tmp_path, "wrapped_dep_env"))
    _edit(
        env / "server" / "rules.py",
        "    import some_missing_module_xyz\n",
        "    import server.rules_engine as some_missing_module_xyz\n",
    )
    result = _one(validate_folder(env), "app.import")
    assert result.status == "fail" and "wrapped_dep_env needs" in result.message, result


# -- what `openenv push` writes: a warning on a source folder, an error on a Space ------------------------------

PUSH_WRITES: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "no README": (lambda e: (e / "README.md").unlink(), "readme.front_matter", "fail"),
    "no front matter": (lambda e: (e / "README.md").write_text("# Template Env\n"), "readme.front_matter", "fail"),
    "no sdk": (lambda e: _edit(e / "README.md", "sdk: docker\n", ""), "readme.sdk", "fail"),
    "no app_port": (lambda e: _edit(e / "README.md", "app_port: 8000\n", ""), "readme.app_port", "fail"),
    "no openenv tag": (lambda e: _edit(e / "README.md", "  - openenv\n", "  - games\n"), "readme.tag", "warn"),
}


@pytest.mark.parametrize(("mutate", "check_id", "on_a_space"), PUSH_WRITES.values(), ids=PUSH_WRITES.keys())
def test_what_push_writes_is_a_warning_on_a_source_folder_only(
    tmp_path: Path, mutate, check_id: str, on_a_space: str
) -> None:
    env = _copy(tmp_path, "template_env")
    mutate(env)
    source = validate_folder(env, import_app=False)
    result = _one(source, check_id)
    assert result.status == "warn" and "`openenv push` writes" in (result.remediation or ""), result
    assert source.exit_code == 0
    space = validate_folder(env, space_id="someone/template_env", import_app=False)
    assert _one(space, check_id).status == on_a_space
    assert space.exit_code == (1 if on_a_space == "fail" else 0)


@pytest.mark.parametrize(
    ("old", "new", "check_id"),
    [
        ("sdk: docker", "sdk: gradio", "readme.sdk"),
        ("app_port: 8000", "app_port: 8001", "readme.app_port"),
        ("tags:\n  - openenv\n---", "tags:\n  - openenv\n", "readme.front_matter"),
    ],
)
def test_front_matter_that_is_wrong_fails_a_source_folder_too(
    tmp_path: Path, old: str, new: str, check_id: str
) -> None:
    env = _copy(tmp_path, "template_env")
    _edit(env / "README.md", old, new)
    report = validate_folder(env, import_app=False)
    assert _one(report, check_id).status == "fail" and report.exit_code == 1


# -- upstream's package layout ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dist", ["openenv-template_env", "openenv-template-env", "openenv-template", "template_env", "Template-Env"]
)
def test_upstreams_distribution_names_are_the_envs_package(tmp_path: Path, dist: str) -> None:
    env = _copy(tmp_path, "template_env")
    _edit(env / "pyproject.toml", 'name = "openenv-template_env"', f'name = "{dist}"')
    assert _one(validate_folder(env, import_app=False), "package.pyproject").status == "pass"


def test_a_distribution_named_after_something_else_is_flagged(tmp_path: Path) -> None:
    env = _copy(tmp_path, "template_env")
    _edit(env / "pyproject.toml", 'name = "openenv-template_env"', 'name = "openenv-counter"')
    result = _one(validate_folder(env, import_app=False), "package.pyproject")
    assert result.status == "warn" and "'openenv-counter'" in result.message and result.line == 6


@pytest.mark.parametrize(
    "requirement",
    [
        "openenv>=0.2.2",
        "openenv[core]>=0.2.2",
        "openenv-core[core]>=0.2.2",
        "openenv-core>=0.1.0",
        "openenv-core @ git+https://github.com/meta-pytorch/OpenEnv.git@v0.2.1",
    ],
)
def test_upstreams_sdk_is_the_sdk_dependency(tmp_path: Path, requirement: str) -> None:
    env = _copy(tmp_path, "template_env")
    (env / "server" / "requirements.txt").unlink()
    _edit(env / "pyproject.toml", '"openenv>=0.2.2"', f'"{requirement}"')
    report = validate_folder(env, import_app=False)
    assert _one(report, "deps.sdk").status == "pass"
    extra = _one(report, "package.server_extra")  # upstream's SDK is one install: nothing to split out
    assert extra.status == "pass" and "upstream's SDK" in extra.message


def test_without_any_sdk_dependency_deps_sdk_warns(tmp_path: Path) -> None:
    env = _copy(tmp_path, "template_env")
    (env / "server" / "requirements.txt").unlink()
    _edit(env / "pyproject.toml", '"openenv>=0.2.2",', "")
    assert _one(validate_folder(env, import_app=False), "deps.sdk").status == "warn"


def test_clients_on_upstreams_env_client_and_mcp_tool_client_are_typed() -> None:
    template = _one(validate_folder(FIXTURES / "template_env", import_app=False), "package.client")
    assert (
        template.status == "pass" and template.message == "TemplateEnv(EnvClient[AddAction, CountObservation, State])"
    )  # the SDK's State
    mcp = _one(validate_folder(FIXTURES / "port_env", import_app=False), "package.client")
    assert mcp.status == "pass" and mcp.message == "PortEnv(MCPToolClient)"


def test_a_client_base_that_is_not_the_sdks_is_not_a_typed_client(tmp_path: Path) -> None:
    env = _copy(tmp_path, "port_env")
    _edit(env / "client.py", "from openenv.core.mcp_client import MCPToolClient\n", "class MCPToolClient:\n    pass\n")
    assert _one(validate_folder(env, import_app=False), "package.client").status == "warn"


def test_a_model_the_client_names_must_still_be_exported(tmp_path: Path) -> None:
    env = _copy(tmp_path, "package_env")
    _edit(
        env / "__init__.py",
        "from .models import DateAction, DateObservation, HuntState",
        "from .models import DateAction, DateObservation",
    )
    result = _one(validate_folder(env, import_app=False), "package.client")
    assert result.status == "warn" and "HuntState" in result.message


DIFFERENT_IMPORT_NAMES = {
    "python-chess": "chess",
    "python-dateutil": "dateutil",
    "PyYAML": "yaml",
    "Pillow": "PIL",
    "ale-py": "ale_py",
    "scikit-learn": "sklearn",
    "beautifulsoup4": "bs4",
    "opencv-python-headless": "cv2",
    "browsergym-core": "browsergym.core",
    "sumo-rl": "sumo_rl",
    "absl-py": "absl",
}


def test_distributions_that_provide_another_import_name_satisfy_deps_imports(tmp_path: Path) -> None:
    env = _copy(tmp_path, "template_env")
    (env / "server" / "extras.py").write_text(
        "".join(f"import {module}\n" for module in DIFFERENT_IMPORT_NAMES.values())
    )
    deps = "".join(f'    "{dist}",\n' for dist in DIFFERENT_IMPORT_NAMES)
    _edit(env / "pyproject.toml", '    "openenv>=0.2.2",\n', f'    "openenv>=0.2.2",\n{deps}')
    assert [r.status for r in validate_folder(env, import_app=False).results("deps.imports")] == ["pass"]
    _edit(env / "pyproject.toml", '    "python-chess",\n', "")
    result = _one(validate_folder(env, import_app=False), "deps.imports")
    assert (result.status, result.details["module"], result.file, result.line) == (
        "warn",
        "chess",
        "server/extras.py",
        1,
    )


def test_what_upstreams_sdk_requires_needs_no_declaration(tmp_path: Path) -> None:
    env = _copy(tmp_path, "port_env")
    (env / "server" / "requirements.txt").write_text("openenv>=0.2.2\n")  # fastmcp comes with upstream's SDK
    assert [r.status for r in validate_folder(env, import_app=False).results("deps.imports")] == ["pass"]
    _edit(env / "pyproject.toml", '"openenv>=0.2.2"', '"openenv-hub"')  # ... not with ours
    (env / "server" / "requirements.txt").unlink()
    result = _one(validate_folder(env, import_app=False), "deps.imports")
    assert (result.status, result.details["module"]) == ("warn", "fastmcp")


# -- a game that raises on an illegal move ---------------------------------------------------------------------


def test_an_action_the_env_raises_on_is_passed_over_for_the_next(tmp_path: Path) -> None:
    report = validate(_on_our_sdk(_copy(tmp_path, "rejecting_env")), run=True, latency_steps=2)
    assert report.exit_code == 0 and report.status == "pass", _seen(report)
    step = _one(report, "runtime.step")
    steps = [(r["sent"], r["outcome"], r["code"]) for r in step.details["steps"] if r["request"] == "step"]
    assert steps[:2] == [('{"number": 0}', "refused", "EXECUTION_ERROR"), ('{"number": 1}', "ok", None)], step
    assert step.details["action"] == {"number": 1}, step


# -- against upstream's own SDK --------------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.timeout(900)  # one child import of upstream's SDK per shape: seconds each, more on a busy machine
def test_each_shape_imports_with_upstreams_sdk(upstream_python: str) -> None:
    seen = {}
    for shape in SHAPES:
        report = validate_folder(FIXTURES / shape, python=upstream_python)
        result = _one(report, "app.import")
        seen[shape] = (result.status, result.details.get("import_mode"))
        assert report.summary.failed == 0, (shape, _seen(report))
    modes = {"package_env": "package", "selfimport_env": "installed"}  # selfimport_env: `pip install -e .` in its image
    assert seen == {shape: ("pass", modes.get(shape, "plain")) for shape in SHAPES if shape != "wrapped_dep_env"} | {
        "wrapped_dep_env": ("warn", "plain")
    }


@pytest.mark.interop
@pytest.mark.slow
@pytest.mark.parametrize("shape", ["package_env", "rejecting_env", "port_env"])
def test_upstream_servers_of_the_shapes_pass_the_runtime_checks(upstream_python: str, shape: str) -> None:
    report = validate(FIXTURES / shape, python=upstream_python, run=True, latency_steps=3)
    assert report.status == "pass", _seen(report)
    if shape == "rejecting_env":  # upstream answers the illegal move 0 with EXECUTION_ERROR
        steps = [r for r in _one(report, "runtime.step").details["steps"] if r["request"] == "step"]
        assert (steps[0]["sent"], steps[0]["outcome"], steps[0]["code"]) == (
            '{"number": 0}',
            "refused",
            "EXECUTION_ERROR",
        )
