"""RFC 008 validation against upstream OpenEnv 0.10.0's own package (its own venv, its own CLI):
the policy tables, the report schema, the verdict of every check upstream implements at the static
level, and what both say to bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from openenv.validation.rfc008 import Level, load_policy, validate_package
from tests.support.servers import ROOT
from tests.support.upstream_validate import upstream_package, upstream_validate

pytestmark = [pytest.mark.interop]

ENVS = sorted(p for p in (ROOT / "envs").iterdir() if (p / "openenv.yaml").is_file())
SHAPES = sorted(p for p in (ROOT / "tests" / "fixtures" / "upstream").iterdir() if (p / "openenv.yaml").is_file())


def _ours(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openenv.cli", "validate", *args], capture_output=True, text=True, timeout=300
    )


def test_the_policies_are_upstreams_check_for_check(upstream010_python: str) -> None:
    """46 check ids, each with upstream's level, lane and severity, in both policy versions, and the
    bounds on what a manifest may declare."""
    folder = upstream_package(upstream010_python) / "policies"
    for version in ("v1", "v2"):
        theirs = json.loads((folder / f"severity-{version}.json").read_text())
        mine = load_policy(version)
        assert [
            {"check_id": e.check_id, "level": int(e.level), "lane": e.lane, "severity": e.severity}
            for e in mine.entries.values()
        ] == theirs["entries"]
        assert {k: getattr(mine.bounds, k) for k in theirs["bounds"]} == theirs["bounds"]
    assert len(load_policy("v2").entries) == 46


def _fixture_cases(tmp: Path) -> list[Path]:
    """echo_env's copies with one thing wrong (or unusual) in the `validation:` block each."""
    base = yaml.safe_load((ROOT / "envs" / "echo_env" / "openenv.yaml").read_text())
    block = base["validation"]

    def case(name: str, change: Any) -> Path:
        folder = tmp / name
        shutil.copytree(ROOT / "envs" / "echo_env", folder, ignore=shutil.ignore_patterns("__pycache__"))
        data = json.loads(json.dumps(base))
        text = change(data) if callable(change) else change
        (folder / "openenv.yaml").write_text(text if isinstance(text, str) else yaml.safe_dump(data))
        return folder

    def edit(path: str, value: Any) -> Any:
        def apply(data: dict[str, Any]) -> None:
            *parents, last = path.split(".")
            node = data["validation"]
            for p in parents:
                node = node.setdefault(p, {})
            if value is _DROP:
                node.pop(last, None)
            else:
                node[last] = value

        return apply

    assert block  # echo_env carries a full block (issue 46)
    return [
        case("no_block", lambda d: d.pop("validation")),
        case("not_yaml", "name: [unclosed\n"),
        case("block_not_mapping", lambda d: d.__setitem__("validation", [1, 2])),
        case("oracle_tolerance_too_high", edit("reward.oracle_tolerance", 0.5)),
        case("floor_margin_too_low", edit("reward.floor_margin", 0.01)),
        case("timeout_too_long", edit("resources.episode_timeout_s", 7200)),
        case("range_backwards", edit("reward.range", [1.0, 0.0])),
        case("no_resources", edit("resources", _DROP)),
        case("gpu_types_without_gpus", edit("resources.gpu_types", ["a100"])),
        case("allowlist_without_hosts", edit("network", {"mode": "allowlist"})),
        case(
            "injected_state_without_set_state", edit("capabilities.oracle", {"form": "injected_state", "location": "x"})
        ),
        case("llm_judged_without_pin", edit("capabilities.llm_judged", True)),
        case("script_verifier_without_entry", edit("capabilities.verifier", {"kind": "script"})),
        case("unknown_capability", edit("capabilities.telepathy", True)),
        case("empty_tags", edit("types.tags", [])),
        case("schema_2", edit("execution", {"probe_path": "validation/oracle.json"})),
        case("schema_2_escaping", edit("execution", {"probe_path": "../outside.json"})),
        case("our_own_keys", edit("stochastic", False)),
    ]


_DROP = object()


@pytest.mark.timeout(600)
def test_static_verdicts_agree_with_upstreams_validator(upstream010_python: str, tmp_path: Path) -> None:
    """On the bundled envs, upstream-shaped envs and echo_env with each kind of bad block: upstream's
    `openenv validate --level static --json --policy v2` and ours give static.manifest, the one
    check upstream implements there, the same status (our other static checks may fail a folder
    upstream passes: it does not run them); the source digest is the same."""
    cases = [*ENVS, *SHAPES, *_fixture_cases(tmp_path)]
    upstream = upstream_validate(
        upstream010_python, [[str(c), "--level", "static", "--json", "--policy", "v2"] for c in cases]
    )
    disagreements = []
    for folder, theirs in zip(cases, upstream, strict=True):
        report, _ = validate_package(folder, import_app=False)
        mine = report.statuses()
        their_results = {r["check_id"]: r["status"] for r in theirs["report"]["results"]}
        # upstream implements static.manifest alone at this level
        assert set(their_results) == {"static.manifest"}, their_results
        if (
            mine["static.manifest"] != their_results["static.manifest"]
            or report.source_digest != theirs["report"]["source_digest"]
        ):
            disagreements.append((folder.name, mine["static.manifest"], their_results))
        if their_results["static.manifest"] == "fail":
            assert theirs["exit_code"] == 1 and report.verdict == "fail"
    assert disagreements == []
    # the cases cover both outcomes
    verdicts = {f.name: s["report"]["results"][0]["status"] for f, s in zip(cases, upstream, strict=True)}
    assert verdicts["echo_env"] == verdicts["schema_2"] == verdicts["our_own_keys"] == "pass"
    assert verdicts["floor_margin_too_low"] == verdicts["no_block"] == verdicts["not_yaml"] == "fail"


def test_the_bundled_envs_pass_every_static_check_upstream_has(upstream010_python: str) -> None:
    """Upstream's validator passes the seven bundled envs at the static level (their `validation:`
    blocks are complete); so does ours, with every static check of the local lane."""
    upstream = upstream_validate(upstream010_python, [[str(e), "--level", "static", "--json"] for e in ENVS])
    assert [(u["exit_code"], u["report"]["verdict"]) for u in upstream] == [(0, "pass")] * len(ENVS)
    for env in ENVS:
        report, _ = validate_package(env, import_app=False)
        problems = {r.check_id: r.evidence for r in report.results if r.status not in ("pass", "skip")}
        assert problems == {}, env.name
        skipped = {r.check_id for r in report.results if r.status == "skip"}
        assert skipped == {"static.reproducible_build"}, (env.name, skipped)


def test_reports_follow_upstreams_report_schema(upstream010_python: str, tmp_path: Path) -> None:
    """`openenv validate --json` prints a ValidationReportV2 that upstream's own
    report-v2.schema.json accepts: a passing env up to the semantic level, a failing folder, and
    a manifest that does not parse."""
    schema = json.loads((upstream_package(upstream010_python) / "schemas" / "report-v2.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    broken = tmp_path / "broken_env"
    shutil.copytree(ROOT / "envs" / "echo_env", broken, ignore=shutil.ignore_patterns("__pycache__"))
    (broken / "openenv.yaml").write_text("name: broken_env\nvalidation: {reward: {range: [1, 0]}}\n")
    out = tmp_path / "report.json"
    runs = [
        _ours(str(ROOT / "envs" / "blackjack_env"), "--level", "semantic", "--json", "--output", str(out)),
        _ours(str(broken), "--json"),
        _ours(str(ROOT / "tests" / "fixtures" / "upstream" / "tools_env"), "--json"),
    ]
    assert [r.returncode for r in runs] == [0, 1, 1], [r.stderr[-500:] for r in runs]
    for run in runs:
        doc = json.loads(run.stdout)
        errors = [e.message for e in validator.iter_errors(doc)]
        assert errors == [], errors
    assert json.loads(out.read_text()) == json.loads(runs[0].stdout)  # --output writes the same document
    sbom = json.loads(out.with_name("report.sbom.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX" and sbom["metadata"]["component"]["name"] == "blackjack_env"
    full = json.loads(runs[0].stdout)
    assert full["levels_run"] == [1, 2, 3] and full["verdict"] == "warn"  # skips (the sandbox's checks) warn
    statuses = {r["check_id"]: r["status"] for r in full["results"]}
    assert {k for k, v in statuses.items() if v == "fail"} == set()
    for check in ("runtime.startup", "runtime.reward_well_formed", "runtime.state_contract", "semantic.oracle_max"):
        assert statuses[check] == "pass", check
    assert not any(cid.startswith(("hub.", "statistical.")) for cid in statuses)  # the local lane only


@pytest.mark.timeout(300)
def test_bad_input_gets_upstreams_exit_codes_and_a_message(upstream010_python: str, tmp_path: Path) -> None:
    """Unknown levels and policies are 3, a folder that is not a package 2, a broken block 1: as
    upstream's CLI says; ours adds the message of what to do, never a traceback."""
    echo = str(ROOT / "envs" / "echo_env")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        [echo, "--level", "everything"],
        [echo, "--policy", "v9"],
        [echo, "--level", "runtime", "--policy", "v1"],
        [str(empty)],
        [str(tmp_path / "no_such_folder")],
    ]
    theirs = [u["exit_code"] for u in upstream_validate(upstream010_python, [[*c, "--skip-build"] for c in cases])]
    ours = [_ours(*c) for c in cases]
    assert [o.returncode for o in ours] == theirs == [3, 3, 3, 2, 2]
    for o in ours:
        assert "Traceback" not in o.stderr and "error: " in o.stderr, o.stderr
    assert "static, runtime, semantic" in ours[0].stderr and "v1, v2" in ours[1].stderr


def test_declared_plans_that_cannot_be_read_fail_their_checks(tmp_path: Path) -> None:
    """An oracle or canary file that is missing, not JSON or outside the package fails the
    semantic check it feeds, with the file named; the run still reports every other check."""
    env = tmp_path / "grid_world_env"
    shutil.copytree(ROOT / "envs" / "grid_world_env", env, ignore=shutil.ignore_patterns("__pycache__"))
    data = yaml.safe_load((env / "openenv.yaml").read_text())
    data["validation"]["capabilities"]["canaries"] = "validation/missing.json"
    (env / "openenv.yaml").write_text(yaml.safe_dump(data))
    (env / "validation" / "oracle.json").write_text("{not json")
    report, _ = validate_package(env, level=Level.SEMANTIC, import_app=False)
    by_id = {r.check_id: r for r in report.results}
    assert by_id["semantic.oracle_max"].status == "fail"
    assert "validation/oracle.json is not JSON" in by_id["semantic.oracle_max"].evidence[0]
    assert by_id["semantic.canary_floor"].status == "fail"
    assert "validation/missing.json cannot be read" in by_id["semantic.canary_floor"].evidence[0]
    assert by_id["runtime.startup"].status == "pass" and report.verdict == "fail"


_UPSTREAM_IMPLEMENTED = """
from openenv.validation.policy import load_policy
from openenv.validation.runner import default_grader_registry
registry = default_grader_registry(load_policy("v2"))
policy = load_policy("v2")
# runtime.startup is the runner's own result; every other implemented id has a grader
print(" ".join(sorted({"runtime.startup"} | {e.check_id for e in policy.entries if registry.get(e.check_id)})))
"""


def test_the_docs_table_lists_all_46_ids_as_the_policy_and_upstream_say(upstream010_python: str) -> None:
    text = (ROOT / "docs" / "validate.md").read_text()
    rows = re.findall(
        r"^\| `([a-z_]+\.[a-z_]+)` \| (local|hub) \| (\w+) \| (fail|warn|advisory) \| (.+) \| (implemented|reserved) \|$",
        text,
        re.M,
    )
    policy = load_policy("v2")
    assert [(cid, lane, level, sev) for cid, lane, level, sev, _, _ in rows] == [
        (e.check_id, e.lane, e.level.name.lower(), e.severity) for e in policy.entries.values()
    ]
    out = subprocess.run(
        [upstream010_python, "-c", _UPSTREAM_IMPLEMENTED],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.environ.get("TMPDIR", "/tmp"),
    )
    assert out.returncode == 0, out.stderr
    implemented = out.stdout.split()
    assert len(implemented) == 6
    assert sorted(cid for cid, *_, status in rows if status == "implemented") == implemented


def test_episode_isolation_fails_an_episode_that_another_session_changes() -> None:
    """runtime.episode_isolation compares the plan played alone with the same plan played while a
    second session plays: a difference fails it, naming the observation; a server that took the
    second session only after the first ended (one place) could not show it, and the check skips."""
    from openenv.validation.report import Report
    from openenv.validation.rfc008.manifest import normalize
    from openenv.validation.rfc008.runtime import Plan, RuntimeSubject, Transcript, _isolation, _Run

    manifest = normalize(yaml.safe_load((ROOT / "envs" / "echo_env" / "openenv.yaml").read_text()))
    subject = RuntimeSubject(
        "http://127.0.0.1:9", ROOT / "envs" / "echo_env", manifest, Report(), load_policy(), Level.RUNTIME
    )
    plan = Plan.model_validate(
        {
            "plan_schema_version": "1",
            "reset": {"episode_id": "e", "seed": 1},
            "actions": [{"message": "a"}, {"message": "b"}],
        }
    )

    def played(*echoed: str, waited: bool = False) -> Transcript:
        t = Transcript(waited=waited)
        for i, text in enumerate(echoed):
            reply = {
                "type": "observation",
                "data": {"observation": {"echoed_message": text}, "reward": 0.1, "done": False},
            }
            t.exchanges.append(("reset" if i == 0 else "step", {"type": "step"}, reply))
        return t

    run = _Run(subject)
    run.plan, run.main = plan, played("ready", "a", "b")
    run.beside = (played("ready", "a", "b"), played("ready", ""))
    assert _isolation(run).status == "pass"
    run.beside = (played("ready", "a", "a"), played("ready", ""))  # the other session's state leaked in
    leaked = _isolation(run)
    assert leaked.status == "fail" and leaked.evidence[0].startswith("observation 2 differs when another episode runs")
    run.beside = (played("ready", "a", "b"), played("ready", "", waited=True))
    assert _isolation(run).status == "skip"


def _echo_scored(
    tmp_path: Path,
    name: str,
    *,
    rubric: bool = True,
    length: str = "reward_for(len(a.message))",
    fmt: str = "1.0",
    reward: str = "",
) -> Path:
    """echo_env declaring a rubric tree, its steps scored by a WeightedSum of `length` (by default
    the echo's reward, weight 1) and `format` (`fmt`, weight 0); `reward` then overwrites the reward."""
    folder = tmp_path / name / "echo_env"
    shutil.copytree(ROOT / "envs" / "echo_env", folder, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = folder / "openenv.yaml"
    manifest.write_text(
        manifest.read_text().replace(
            "    verifier: {kind: reward_channel}", "    verifier: {kind: reward_channel}\n    rubric_tree: true"
        )
    )
    code = folder / "server" / "echo_environment.py"
    text = code.read_text()
    if rubric:
        text = text.replace(
            "        self._max_steps: int | None = None\n",
            "        self._max_steps: int | None = None\n"
            "        from openenv.rubrics import WeightedSum\n\n"
            "        self.rubric = WeightedSum(\n"
            f"            length=(lambda a, o: {length}, 1.0),\n"
            f"            format=(lambda a, o: {fmt}, 0.0),\n"
            "        )\n",
            1,
        )
        text = text.replace(
            "        return EchoObservation(\n            echoed_message=action.message, message_length=length, reward=reward_for(length), done=done\n        )",
            "        obs = self.apply_rubric(action, EchoObservation(echoed_message=action.message, message_length=length, done=done))\n"
            + (f"        obs.reward = {reward}\n" if reward else "")
            + "        return obs",
        )
    code.write_text(text)
    return folder


def test_rubric_checks_read_the_parts_each_step_names(tmp_path: Path) -> None:
    """An env declaring `rubric_tree: true` is served and its oracle replayed: scored by a rubric, each
    step names its parts and its reward moves with them (both pass); the plain echo names none
    (introspectable fails, attribution cannot look); a reward set beside a rubric whose parts all
    scored 0 is attributed to nothing (attribution fails, naming the step)."""
    cases = {
        "scored": _echo_scored(tmp_path, "scored"),
        "plain": _echo_scored(tmp_path, "plain", rubric=False),
        "beside": _echo_scored(tmp_path, "beside", length="0.0", fmt="0.0", reward="reward_for(length)"),
    }
    ids = ("runtime.rubric_introspectable", "runtime.reward_attribution")
    found = {}
    for name, folder in cases.items():
        report, _ = validate_package(folder, level=Level.RUNTIME, import_app=False)
        found[name] = {r.check_id: r for r in report.results if r.check_id in ids}
    scored = found["scored"]
    assert [scored[i].status for i in ids] == ["pass", "pass"], scored
    assert scored["runtime.rubric_introspectable"].measured["components"] == ["format", "length"]
    plain = found["plain"]
    assert [plain[i].status for i in ids] == ["fail", "skip"], plain
    assert "no reward components" in plain["runtime.rubric_introspectable"].evidence[0]
    beside = found["beside"]
    assert [beside[i].status for i in ids] == ["pass", "fail"], beside
    assert "while every part scored 0" in beside["runtime.reward_attribution"].evidence[0]


def test_an_answer_shown_when_the_episode_begins_fails_no_solution_leakage(tmp_path: Path) -> None:
    """wordle_env as bundled shows nothing of its hidden word (pass); a copy whose first observation
    ends with the hidden word gives the oracle's last guess away (fail, naming it). chess_env shows
    its opening's legal moves, the oracle's first move among them, on every seed: nothing leaks."""
    leaky = tmp_path / "wordle_env"
    shutil.copytree(ROOT / "envs" / "wordle_env", leaky, ignore=shutil.ignore_patterns("__pycache__"))
    code = leaky / "server" / "wordle_environment.py"
    code.write_text(
        code.read_text().replace('You have {max_guesses} tries."', 'You have {max_guesses} tries. ({self._answer})"')
    )
    found = {}
    for name, folder in {
        "bundled": ROOT / "envs" / "wordle_env",
        "leaky": leaky,
        "chess": ROOT / "envs" / "chess_env",
    }.items():
        report, _ = validate_package(folder, level=Level.SEMANTIC, import_app=False)
        [found[name]] = [r for r in report.results if r.check_id == "semantic.no_solution_leakage"]
    assert found["bundled"].status == "pass" and found["chess"].status == "pass", found
    assert found["leaky"].status == "fail", found["leaky"]
    assert found["leaky"].evidence == [
        "the answer 'think' (an oracle action's) is shown when the episode begins, before it is sent"
    ]
