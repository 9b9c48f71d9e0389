"""`openenv import` of Verifiers and ORS sources (tests/fixtures/imports, written with the libraries'
own types): each folder it writes passes `openenv validate` with the library installed, and says where
it came from; served on 127.0.0.1 by the venv that has `verifiers` and `openreward`
(scripts/interop-venv), it serves the source's tasks through the Task API, scores a Verifiers answer
with the env's rubric (its tools as MCP tools) and pays an ORS tool call's reward. Bad sources exit 2
and write nothing."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from openenv import GenericEnvClient
from openenv.interop.provenance import read_provenance
from tests.support.cli import Run, openenv_command
from tests.support.servers import ROOT, serve_process

FIXTURES = ROOT / "tests" / "fixtures" / "imports"
# fixture → (kind, entry found, name and version the env says it came from)
SOURCES = {
    "vf_arithmetic": ("verifiers", "vf_arithmetic:load_environment", "vf-arithmetic", "0.2.0"),
    "vf_reverse": ("verifiers", "vf_reverse.env:load_environment", "vf-reverse", "0.1.3"),
    "vf_calculator": ("verifiers", "vf_calculator:load_environment", "vf-calculator", "0.1.0"),
    "ors_guess": ("ors", "guess:GuessNumber", "ors-guess", "1.0.1"),
    "ors_trivia": ("ors", "trivia.environment:CapitalTrivia", "ors-trivia", "0.3.0"),
}


@pytest.fixture(scope="module")
def interop_python() -> Path:
    """The venv with `verifiers` and `openreward` (made once by scripts/interop-venv)."""
    out = subprocess.run(["bash", str(ROOT / "scripts" / "interop-venv")], capture_output=True, text=True, timeout=1200)
    assert out.returncode == 0, out.stderr[-3000:]
    return Path(out.stdout.strip())


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every fixture imported once, into one folder (by the .venv's CLI, which has neither library)."""
    root = tmp_path_factory.mktemp("imported")
    for source in SOURCES:
        proc = subprocess.run(
            [openenv_command(), "import", str(FIXTURES / source), "-o", f"{source}_env", "--json"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
    yield root


def test_each_source_imports_into_a_folder_that_validates_and_says_where_it_came_from(
    imported: Path, interop_python: Path, run_cli: Run
) -> None:
    for source, (kind, entry, name, version) in SOURCES.items():
        folder = imported / f"{source}_env"
        manifest = yaml.safe_load((folder / "openenv.yaml").read_text())
        provenance = read_provenance(manifest)
        assert provenance is not None and (provenance.kind, provenance.name, provenance.version) == (
            kind,
            name,
            version,
        )
        readme = (folder / "README.md").read_text()
        assert f"`{name}` {version}" in readme and entry in readme, source
        assert (folder / "source" / "pyproject.toml").read_text() == (FIXTURES / source / "pyproject.toml").read_text()
        # The source's answer plans become the folder's validation plans, and stay out of source/ (the image).
        assert (folder / "validation" / "oracle.json").read_text() == (
            FIXTURES / source / "openenv" / "oracle.json"
        ).read_text()
        assert not (folder / "source" / "openenv").exists()
        assert manifest["validation"]["capabilities"]["oracle"]["location"] == "validation/oracle.json"
        checked = run_cli("validate", str(folder), "--python", str(interop_python), timeout=180)
        assert checked.returncode == 0, (source, checked.stdout[-2000:], checked.stderr[-2000:])
    declared = yaml.safe_load((imported / "vf_calculator_env" / "openenv.yaml").read_text())["validation"]
    assert declared["capabilities"]["declared_tools"] == ["multiply"]  # read from `tools=[multiply]`
    # Without the library, validate says which one is missing (the import never needed it).
    bare = run_cli("validate", str(imported / "vf_reverse_env"))
    assert "'verifiers' is not installed in this Python" in bare.stdout


def _serve(interop_python: Path, folder: Path):  # type: ignore[no-untyped-def]
    return serve_process([openenv_command(interop_python), "serve", str(folder)], cwd=folder)


def test_a_verifiers_env_serves_its_dataset_scores_with_its_rubric_and_lists_its_tools(
    imported: Path, interop_python: Path
) -> None:
    with (
        _serve(interop_python, imported / "vf_calculator_env") as server,
        GenericEnvClient(server.url).sync() as env,
    ):
        assert [s["name"] for s in env.list_splits()] == ["train"]
        assert env.num_tasks("train") == 4 and env.get_task("train", 1)["answer"] == "4368"
        first = env.reset(split="train", index=1)
        prompt = first.observation["prompt"]
        assert prompt[-1] == {"role": "user", "content": "What is 56 * 78?"} and "answer" not in first.observation
        (multiply,) = env.list_tools()
        assert multiply.name == "multiply" and multiply.input_schema["required"] == ["a", "b"]
        assert env.call_tool("multiply", a=56, b=78) == 4368
        scored = env.step({"completion": "4368"})
        assert scored.done and scored.reward == 1.0
        assert scored.observation["metrics"]["multiply_calls"] == 1.0  # the tool call counts in the rollout
        env.reset(split="train", index=0)
        assert env.step({"completion": "407"}).reward == 0.0
    with (
        _serve(interop_python, imported / "vf_reverse_env") as server,
        GenericEnvClient(server.url).sync() as env,
    ):
        assert [s["name"] for s in env.list_splits()] == ["train", "eval"]
        env.reset(split="eval", index=1)  # "tensor"
        right = env.step({"completion": "<answer>rosnet</answer>"})
        assert right.reward == pytest.approx(1.0)  # correctness 0.8 + format 0.2, the rubric's weights
        assert right.observation["metrics"]["reversed_correctly"] == 1.0
        env.reset(split="eval", index=1)
        untagged = env.step({"completion": "rosnet"})  # no <answer> tags: the parser finds no answer
        metrics = untagged.observation["metrics"]
        assert metrics["reversed_correctly"] == 0.0 and 0 < metrics["format_reward_func"] < 1
        assert untagged.reward == pytest.approx(
            0.8 * metrics["reversed_correctly"] + 0.2 * metrics["format_reward_func"]
        )


def test_an_ors_env_serves_its_splits_and_pays_each_tool_calls_reward(imported: Path, interop_python: Path) -> None:
    with (
        _serve(interop_python, imported / "ors_guess_env") as server,
        GenericEnvClient(server.url).sync() as env,
    ):
        assert env.list_splits() == [{"name": "train", "type": "train"}, {"name": "test", "type": "test"}]
        assert env.get_task_range("train", 1, 3) == [
            {"id": "t7", "secret": 7, "high": 20},
            {"id": "t11", "secret": 11, "high": 20},
        ]
        start = env.reset(split="train", index=1)
        assert "Guess it" in start.observation["blocks"][0]["text"]
        assert [t["name"] for t in start.observation["tools"]] == ["guess"]
        low = env.step({"tool": "guess", "arguments": {"number": 3}})
        assert (low.reward, low.done, low.observation["blocks"][0]["text"]) == (0.0, False, "No: higher.")
        refused = env.step({"tool": "shout", "arguments": {}})
        assert refused.reward is None and "not a valid tool" in refused.observation["error"]
        right = env.step({"tool": "guess", "arguments": {"number": 7}})
        assert (right.reward, right.done) == (1.0, True)
        assert env.state()["total_reward"] == 1.0


def _source(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_a_source_that_would_shadow_the_env_folders_modules_exits_2_and_writes_nothing(
    run_cli: Run, tmp_path: Path
) -> None:
    vf = "import verifiers as vf\n\ndef load_environment():\n    return vf.SingleTurnEnv()\n"
    root = _source(tmp_path / "src", {"models.py": vf})
    proc = run_cli("import", str(root), "-o", "clash_env")
    assert proc.returncode == 2 and "models would shadow the env folder's own" in proc.stderr, proc.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".clash_env", "clash_env"))]
