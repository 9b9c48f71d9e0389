"""The runtime and semantic levels of RFC 008, measured on a running env server over its own wire.

Evidence is what the server answered, frame by frame, on sessions this validator opened: the
declared plans (`validation.execution.probe_path`, the oracle, the canaries) are replayed as
data, never run as code. What a server checked from here cannot show (network, containment,
resource use: measurements of its container; the verifier on a second machine) is `skip` with the
reason, never `pass`: the Hub measures those on each revision's container
(hub_service/pipeline/rfc008_container.py, rfc008_cross_host.py).
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv.client._transport import Connection, ws_url_for
from openenv.errors import EnvClientError
from openenv.protocol import loads
from openenv.validation.report import Report
from openenv.validation.rfc008.manifest import NormalizedManifest, NormalizedManifestV2
from openenv.validation.rfc008.policy import Level, Policy
from openenv.validation.rfc008.report import ResultV2
from openenv.validation.runtime import _http_get

__all__ = [
    "DeclaredPlans",
    "Plan",
    "PlanError",
    "RuntimeSubject",
    "Transcript",
    "declared_plans",
    "load_canaries",
    "load_plan",
    "play_plan",
    "runtime_results",
]

MAX_PLAN_BYTES = 65_536


class _Reset(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    episode_id: str = Field(min_length=1, max_length=128)
    seed: int = Field(ge=0, le=2**32 - 1)
    options: dict[str, Any] = Field(default_factory=dict)


class Plan(BaseModel):
    """A runtime plan (upstream's `plan_schema_version: "1"`): one reset, then 1-100 actions, as data."""

    model_config = ConfigDict(extra="forbid", strict=True)
    plan_schema_version: str = Field(pattern=r"^1$")
    reset: _Reset
    actions: list[dict[str, Any]] = Field(min_length=1, max_length=100)


class PlanError(ValueError):
    """A declared plan file is missing, outside the package, too big or not a plan."""


def _plan_file(root: Path, rel: str) -> Any:
    base = root.resolve()
    path = (base / rel).resolve()
    if not path.is_relative_to(base):
        raise PlanError(f"{rel} points outside the package")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise PlanError(f"{rel} cannot be read: {exc.strerror or exc}") from None
    if len(raw) > MAX_PLAN_BYTES:
        raise PlanError(f"{rel} is over {MAX_PLAN_BYTES} bytes")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise PlanError(f"{rel} is not JSON: {exc}") from None


def load_plan(root: Path, rel: str) -> Plan:
    """The runtime plan in the package file `rel`.

    Raises:
        PlanError: with what is wrong.
    """
    try:
        return Plan.model_validate(_plan_file(root, rel))
    except ValidationError as exc:
        raise PlanError(f"{rel} is not a runtime plan: {_errors(exc)}") from None


def load_canaries(root: Path, rel: str) -> list[Plan]:
    data = _plan_file(root, rel)
    items = data.get("canaries") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise PlanError(f'{rel} must be {{"canaries": [<runtime plan>, ...]}} with at least one plan')
    try:
        return [Plan.model_validate(i) for i in items]
    except ValidationError as exc:
        raise PlanError(f"{rel}: a canary is not a runtime plan: {_errors(exc)}") from None


def _errors(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'plan'}: {e['msg']}" for e in exc.errors()[:5])


@dataclass
class Transcript:
    """One episode as the server answered it: (operation, request, reply) per frame."""

    exchanges: list[tuple[str, dict[str, Any], Any]] = field(default_factory=list)
    failure: str | None = None
    waited: bool = False  # the server said CAPACITY_REACHED before it took the session

    def observations(self) -> list[tuple[int, str, Any]]:
        return [(i, op, reply) for i, (op, _, reply) in enumerate(self.exchanges) if op in ("reset", "step")]

    def last_reward(self) -> float | None:
        steps = [r for _, op, r in self.observations() if op == "step" and isinstance(r, dict)]
        reward = steps[-1].get("data", {}).get("reward") if steps else None
        return float(reward) if isinstance(reward, (int, float)) and not isinstance(reward, bool) else None

    def outcome(self, varying: list[str]) -> list[Any]:
        """The replies with the fields that vary by design left out (for comparing two plays)."""
        out = []
        for _, _, reply in self.observations():
            data = json.loads(json.dumps(reply.get("data") if isinstance(reply, dict) else reply))
            for dotted in varying:
                obs = data.get("observation") if isinstance(data, dict) else None
                if isinstance(obs, dict):
                    obs.pop(dotted.removeprefix("observation.").split(".")[0], None)
            out.append(data)
        return out


@dataclass
class RuntimeSubject:
    url: str
    root: Path | None
    manifest: NormalizedManifest | None
    legacy: Report
    policy: Policy
    level: Level
    timeout_s: float = 15.0
    headers: dict[str, str] = field(default_factory=dict)
    varying_fields: list[str] = field(default_factory=list)
    stochastic: bool = False
    local_process: bool = False  # served as a process here (validate --run), not in a container


@dataclass
class DeclaredPlans:
    """What a package declares to replay: the runtime level's plan (schema 2's probe plan, else the
    oracle's) and where it comes from, the oracle, the canaries, and what could not be read."""

    plan: Plan | None
    source: str
    oracle: Plan | None
    canaries: list[Plan]
    problem: str | None


def declared_plans(s: RuntimeSubject) -> DeclaredPlans:
    """The plans `s`'s package declares (read, never run)."""
    run = _Run(s)
    run.read_plans()
    problem = run.plan_error or run.oracle_error or run.canaries_error
    return DeclaredPlans(run.plan, run.plan_source, run.oracle, run.canaries, problem)


async def play_plan(s: RuntimeSubject, plan: Plan, *, states: bool = True) -> Transcript:
    """Replay `plan` on a new session: reset, then each action (with a state after each one unless
    `states` is false), until done."""
    t = Transcript()
    ends = time.monotonic() + s.timeout_s
    while True:  # a session closed a moment before may still hold the server's one place
        try:
            conn = await Connection.open(
                ws_url_for(s.url), headers=s.headers, timeout_s=s.timeout_s, max_message_bytes=16 << 20
            )
        except (EnvClientError, OSError) as exc:
            t.failure = f"could not open a session: {exc}"
            return t
        reset = {
            "type": "reset",
            "data": {"seed": plan.reset.seed, "episode_id": plan.reset.episode_id, **plan.reset.options},
        }
        try:
            reply = loads(await conn.call(json.dumps(reset).encode(), s.timeout_s))
        except EnvClientError as exc:
            await conn.close()
            t.failure = f"reset got no reply: {exc}"
            return t
        code = reply.get("data", {}).get("code") if isinstance(reply, dict) and reply.get("type") == "error" else None
        if code != "CAPACITY_REACHED" or time.monotonic() > ends:
            break
        t.waited = True
        await conn.close()
        await asyncio.sleep(0.2)
    try:
        t.exchanges.append(("reset", reset, reply))
        after = (("state", {"type": "state"}),) if states else ()
        for op, frame in [*after] + [x for a in plan.actions for x in (("step", {"type": "step", "data": a}), *after)]:
            if not (isinstance(reply, dict) and reply.get("type") in ("observation", "state")):
                t.failure = f"{t.exchanges[-1][0]} was answered {json.dumps(reply)[:300]}"
                break
            reply = loads(await conn.call(json.dumps(frame).encode(), s.timeout_s))
            t.exchanges.append((op, frame, reply))
            if op == "step" and isinstance(reply, dict) and reply.get("data", {}).get("done") is True:
                if states:
                    reply = loads(await conn.call(b'{"type": "state"}', s.timeout_s))
                    t.exchanges.append(("state", {"type": "state"}, reply))
                break
    except EnvClientError as exc:
        t.failure = f"the session ended after {len(t.exchanges)} frames: {exc}"
    finally:
        await conn.close()
    return t


def _get(s: RuntimeSubject, path: str, body: Any = None) -> tuple[int, Any]:
    """GET (or POST `body` to) `path` of the server, by the runtime checks' one bounded reader;
    status 0 and the error's text when it did not answer."""
    try:
        return _http_get(s.url + path, s.headers, s.timeout_s, body)
    except OSError as exc:  # TimeoutError included: a server that drips its reply is cut off
        return 0, str(exc)


def _held(check_id: str, problems: list[str], holds: str, fix: str, **measured: Any) -> ResultV2:
    """`pass` with `holds` when nothing was found, else `fail` with the problems (20 at most) and `fix`."""
    if problems:
        return _r(check_id, "fail", problems[:20], fix, **measured)
    return _r(check_id, "pass", [holds], **measured)


def _r(check_id: str, status: str, evidence: list[str], remediation: str | None = None, **measured: Any) -> ResultV2:
    return ResultV2.model_validate(
        {"check_id": check_id, "status": status, "evidence": evidence, "remediation": remediation, "measured": measured}
    )


_SCHEMA_WORKER = """
import json, sys
import jsonschema
job = json.load(sys.stdin)
validator = jsonschema.Draft202012Validator(job["schema"])
out = []
for i, obs in job["observations"]:
    for err in list(validator.iter_errors(obs))[:3]:
        path = ".".join(str(p) for p in err.absolute_path) or "observation"
        out.append(f"exchange {i}: {path}: {err.message[:200]}")
print(json.dumps(out))
"""


def _schema_problems(schema: Any, observations: list[tuple[int, Any]]) -> list[str]:
    """Observations checked against the env's schema in a child Python with a time limit: a schema
    is the server's words, and a pattern in it could take the validator's time."""
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", _SCHEMA_WORKER],
            input=json.dumps({"schema": schema, "observations": observations}),
            capture_output=True,
            text=True,
            timeout=10,
            env={},
        )
    except subprocess.TimeoutExpired:
        return ["checking the observations against the schema took over 10 s"]
    if done.returncode:
        return [f"the observation schema could not be used: {done.stderr.strip().splitlines()[-1:]}"]
    return list(json.loads(done.stdout))


class _Run:
    """The evidence one runtime run gathers, each piece played once and shared by the checks."""

    def __init__(self, s: RuntimeSubject) -> None:
        self.s = s
        self.plan: Plan | None = None
        self.plan_source = ""
        self.plan_error: str | None = None
        self.oracle: Plan | None = None
        self.oracle_error: str | None = None
        self.canaries: list[Plan] = []
        self.canaries_error: str | None = None
        self.main: Transcript | None = None
        self.again: Transcript | None = None
        self.beside: tuple[Transcript, Transcript] | None = None  # the plan, and another, played at once
        self.oracle_runs: list[Transcript] = []
        self.canary_runs: list[Transcript] = []
        self.oracle_elsewhere: Transcript | None = None  # the oracle's actions from the next seed

    def read_plans(self) -> None:
        s, m = self.s, self.s.manifest
        if m is None or s.root is None:
            return
        caps = m.capabilities
        if caps.oracle is not None and caps.oracle.form == "script":
            try:
                self.oracle = load_plan(s.root, caps.oracle.location)
            except PlanError as exc:
                self.oracle_error = str(exc)
        if caps.canaries:
            try:
                self.canaries = load_canaries(s.root, caps.canaries)
            except PlanError as exc:
                self.canaries_error = str(exc)
        if isinstance(m, NormalizedManifestV2):
            try:
                self.plan, self.plan_source = load_plan(s.root, m.execution.probe_path), m.execution.probe_path
            except PlanError as exc:
                self.plan_error = str(exc)
        elif self.oracle is not None:
            self.plan, self.plan_source = self.oracle, caps.oracle.location if caps.oracle else ""

    async def gather(self) -> None:
        self.read_plans()
        if self.plan is not None:
            self.main = await play_plan(self.s, self.plan)
            self.again = await play_plan(self.s, self.plan)
            other = (
                self.canaries[0]
                if self.canaries
                else self.plan.model_copy(
                    update={"reset": self.plan.reset.model_copy(update={"seed": self.plan.reset.seed + 1})}
                )
            )
            first, second = await asyncio.gather(play_plan(self.s, self.plan), play_plan(self.s, other))
            self.beside = (first, second)
        if self.s.level >= Level.SEMANTIC:
            if self.oracle is not None and self.plan is self.oracle and self.main and self.again:
                self.oracle_runs = [self.main, self.again]  # the runtime level played the oracle twice already
            elif self.oracle is not None:
                self.oracle_runs = [await play_plan(self.s, self.oracle) for _ in range(2)]
            self.canary_runs = [await play_plan(self.s, c) for c in self.canaries]
            if self.oracle is not None:
                seed = self.oracle.reset.model_copy(update={"seed": (self.oracle.reset.seed + 1) % 2**32})
                self.oracle_elsewhere = await play_plan(self.s, self.oracle.model_copy(update={"reset": seed}))


def _started(s: RuntimeSubject) -> tuple[bool, list[str]]:
    ids = ("runtime.starts", "runtime.reachable", "runtime.health", "runtime.schema", "runtime.reset")
    mine = [c for c in s.legacy.checks if c.id in ids]
    if not mine:
        return False, ["the server was not started: openenv.yaml is not valid (see static.layout)"]
    bad = [f"{c.id}: {c.message}" for c in mine if c.status == "fail"]
    return not bad, bad or [f"{c.id}: {c.message}" for c in mine]


def _no_plan(run: _Run, check_id: str) -> ResultV2 | None:
    if run.s.manifest is None:
        return _r(check_id, "skip", ["unmet dependency: static.manifest"])
    if run.plan_error:
        return _r(check_id, "fail", [run.plan_error], "fix the runtime plan the manifest names")
    if run.main is None:
        return _r(
            check_id,
            "skip",
            ["no runtime plan to replay: declare validation.execution.probe_path, or an oracle plan"],
            "add validation/oracle.json (a runtime plan) and name it in capabilities.oracle",
        )
    if run.main.failure:
        return _r(check_id, "fail", [f"the plan's episode failed: {run.main.failure}"], "see runtime.startup")
    return None


def _reward_well_formed(run: _Run) -> ResultV2:
    cid = "runtime.reward_well_formed"
    if (early := _no_plan(run, cid)) is not None:
        return early
    assert run.main is not None and run.s.manifest is not None
    low, high = run.s.manifest.reward.range
    problems, seen = [], 0
    for i, op, reply in run.main.observations():
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, dict) or "reward" not in data:
            problems.append(f"exchange {i} ({op}): no reward in the reply")
            continue
        reward = data["reward"]
        if reward is None and op == "reset":
            continue
        seen += 1
        if type(reward) not in (int, float) or not math.isfinite(reward) or not low <= reward <= high:
            problems.append(f"exchange {i} ({op}): reward {reward!r} is not a finite number in [{low:g}, {high:g}]")
    return _held(
        cid,
        problems,
        f"{seen} rewards, each a finite number in the declared range [{low:g}, {high:g}]",
        "return rewards within validation.reward.range, or declare the range the env really has",
        rewards=seen,
    )


def _step_components(run: _Run) -> list[tuple[Any, dict[str, float] | None]]:
    """Each step's reward and its named parts (`observation.metadata.reward_components`, a map
    of dotted names to finite numbers; None when the step carries none or a malformed one)."""
    assert run.main is not None
    out: list[tuple[Any, dict[str, float] | None]] = []
    for _, op, reply in run.main.observations():
        if op != "step":
            continue
        data = reply.get("data") if isinstance(reply, dict) else None
        data = data if isinstance(data, dict) else {}
        observation = data.get("observation")
        metadata = observation.get("metadata") if isinstance(observation, dict) else None
        parts = metadata.get("reward_components") if isinstance(metadata, dict) else None
        ok = (
            isinstance(parts, dict) and bool(parts) and all(isinstance(k, str) and _finite(v) for k, v in parts.items())
        )
        out.append((data.get("reward"), dict(parts) if ok and isinstance(parts, dict) else None))
    return out


def _finite(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _rubric_introspectable(run: _Run) -> ResultV2:
    cid = "runtime.rubric_introspectable"
    if (early := _no_plan(run, cid)) is not None:
        return early
    steps = _step_components(run)
    bare = [f"step {i}: no reward components in observation.metadata" for i, (_, p) in enumerate(steps, 1) if p is None]
    names = sorted({n for _, p in steps if p for n in p})
    return _held(
        cid,
        bare,
        f"each of the {len(steps)} steps names its reward's parts: {', '.join(names[:8])}",
        "score steps with a rubric (self.rubric, then self.apply_rubric: docs/rubrics.md), which reports "
        "observation.metadata.reward_components, a map of part names to numbers",
        steps=len(steps),
        components=names[:50],
    )


def _reward_attribution(run: _Run) -> ResultV2:
    cid = "runtime.reward_attribution"
    if (early := _no_plan(run, cid)) is not None:
        return early
    steps = _step_components(run)
    if not steps or any(p is None for _, p in steps):
        return _r(cid, "skip", ["unmet dependency: runtime.rubric_introspectable (a step names no parts)"])
    problems: list[str] = []
    before: tuple[Any, dict[str, float] | None] | None = None
    for i, (reward, parts) in enumerate(steps, 1):
        assert parts is not None
        if isinstance(reward, (int, float)) and reward != 0 and all(v == 0 for v in parts.values()):
            problems.append(f"step {i}: reward {reward} while every part scored 0")
        if before is not None and reward != before[0] and parts == before[1]:
            problems.append(f"step {i}: the reward moved from {before[0]} to {reward} while no part's score did")
        before = (reward, parts)
    return _held(
        cid,
        problems,
        f"each of the {len(steps)} rewards moves with its named parts",
        "compute the reward from the rubric's parts (its root's score), not beside them",
        steps=len(steps),
    )


def _observation_schema(run: _Run) -> ResultV2:
    cid = "runtime.observation_schema"
    if (early := _no_plan(run, cid)) is not None:
        return early
    assert run.main is not None
    status, schema = _get(run.s, "/schema")
    obs_schema = schema.get("observation") if isinstance(schema, dict) else None
    if not isinstance(obs_schema, dict):
        return _r(
            cid, "fail", [f"/schema answered {status} without an observation schema"], "serve /schema (create_app does)"
        )
    problems, observations = [], []
    for i, op, reply in run.main.observations():
        data = reply.get("data") if isinstance(reply, dict) else None
        if (
            not isinstance(reply, dict)
            or reply.get("type") != "observation"
            or not isinstance(data, dict)
            or not isinstance(data.get("observation"), dict)
            or type(data.get("done")) is not bool
            or "reward" not in data
        ):
            problems.append(f"exchange {i} ({op}): not an observation envelope")
            continue
        observations.append((i, {**data["observation"], "done": data["done"], "reward": data["reward"]}))
    import importlib.util

    if importlib.util.find_spec("jsonschema") is None:
        return _r(cid, "skip", ["needs the jsonschema library: pip install 'openenv-hub[cli]'"])
    problems += _schema_problems(obs_schema, observations)
    return _held(
        cid,
        problems,
        f"{len(observations)} observations follow the env's own observation schema",
        "make the observations match the Observation model /schema publishes",
        observations=len(observations),
    )


def _state_contract(run: _Run) -> ResultV2:
    cid = "runtime.state_contract"
    if (early := _no_plan(run, cid)) is not None:
        return early
    assert run.main is not None
    problems, episode, steps, states = [], None, 0, 0
    for i, (op, request, reply) in enumerate(run.main.exchanges):
        if op == "reset":
            episode, steps = request["data"]["episode_id"], 0
        elif op == "step":
            steps += 1
        else:
            states += 1
            data = reply.get("data") if isinstance(reply, dict) else None
            if not isinstance(data, dict) or reply.get("type") != "state":
                problems.append(f"exchange {i}: not a state reply")
                continue
            if data.get("episode_id") != episode:
                problems.append(
                    f"exchange {i}: episode_id {data.get('episode_id')!r}, but the reset asked for {episode!r}"
                )
            if type(data.get("step_count")) is not int or data["step_count"] != steps:
                problems.append(f"exchange {i}: step_count {data.get('step_count')!r} after {steps} steps")
    if not states:
        problems.append("no state was answered")
    return _held(
        cid,
        problems,
        f"{states} states: the episode_id the reset asked for, and the steps taken",
        "keep the reset's episode_id in State and count every step in step_count",
        states=states,
    )


def _trajectory_record(run: _Run) -> ResultV2:
    cid = "runtime.trajectory_record"
    if (early := _no_plan(run, cid)) is not None:
        return early
    assert run.main is not None
    incomplete = [
        i
        for i, op, reply in run.main.observations()
        if op == "step" and not ({"observation", "reward", "done"} <= set((reply or {}).get("data", {}) or {}))
    ]
    steps = sum(1 for _, op, _ in run.main.observations() if op == "step")
    return _r(
        cid,
        "fail" if incomplete else "pass",
        [f"exchanges {incomplete[:10]} lack an observation, reward or done"]
        if incomplete
        else [f"{steps} steps recorded, each with its observation, reward and done"],
        "answer every step with observation, reward and done" if incomplete else None,
        steps=steps,
    )


def _determinism(run: _Run) -> ResultV2:
    cid = "runtime.episode_determinism"
    if (early := _no_plan(run, cid)) is not None:
        return early
    assert run.main is not None and run.again is not None
    if run.s.stochastic:
        return _r(cid, "skip", ["the env declares stochastic outcomes (validation.stochastic: true)"])
    a, b = run.main.outcome(run.s.varying_fields), run.again.outcome(run.s.varying_fields)
    differ = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if differ is None and len(a) != len(b):
        differ = min(len(a), len(b))
    if run.again.failure:
        return _r(cid, "fail", [f"the second play failed: {run.again.failure}"], "see runtime.startup")
    return _r(
        cid,
        "pass" if differ is None else "fail",
        [
            f"the plan ({run.plan_source}) played twice from seed {run.plan.reset.seed if run.plan else '?'} gave the same "
            f"{len(a)} observations, rewards and dones"
        ]
        if differ is None
        else [
            f"the two plays differ at observation {differ}: {str(a[differ] if differ < len(a) else None)[:200]} "
            f"vs {str(b[differ] if differ < len(b) else None)[:200]}"
        ],
        None if differ is None else "derive every random choice from reset's seed (or declare varying_fields)",
        observations=len(a),
    )


def _isolation(run: _Run) -> ResultV2:
    cid = "runtime.episode_isolation"
    if (early := _no_plan(run, cid)) is not None:
        return early
    assert run.main is not None and run.beside is not None
    if run.s.stochastic:
        return _r(cid, "skip", ["the env declares stochastic outcomes (validation.stochastic: true)"])
    mine, other = run.beside
    if mine.waited or other.waited:
        return _r(cid, "skip", ["the server holds one session at a time, so no two episodes ran at once"])
    if mine.failure or other.failure:
        return _r(
            cid, "fail", [f"a session beside another failed: {mine.failure or other.failure}"], "see runtime.startup"
        )
    alone, together = run.main.outcome(run.s.varying_fields), mine.outcome(run.s.varying_fields)
    differ = next((i for i, (x, y) in enumerate(zip(alone, together, strict=False)) if x != y), None)
    if differ is None and len(alone) != len(together):
        differ = min(len(alone), len(together))
    return _held(
        cid,
        []
        if differ is None
        else [
            f"observation {differ} differs when another episode runs beside it: "
            f"{str(alone[differ] if differ < len(alone) else None)[:200]} vs "
            f"{str(together[differ] if differ < len(together) else None)[:200]}"
        ],
        f"the plan played while another episode ran in a second session gave the same {len(alone)} observations as alone",
        "keep every episode's state in its Environment instance, never in module or class attributes",
    )


def _seed_control(run: _Run) -> ResultV2:
    cid = "runtime.seed_control"
    if (early := _no_plan(run, cid)) is not None:
        return early
    assert run.main is not None and run.again is not None
    first = run.main.outcome(run.s.varying_fields)[:1]
    again = run.again.outcome(run.s.varying_fields)[:1]
    same = first == again and bool(first)
    return _r(
        cid,
        "pass" if same else "fail",
        ["two resets with the same seed gave the same first observation"]
        if same
        else [
            f"two resets with seed {run.plan.reset.seed if run.plan else '?'} differ: {str(first)[:200]} vs {str(again)[:200]}"
        ],
        None if same else "seed every random choice of reset() from its seed argument",
    )


def _tools(run: _Run) -> ResultV2:
    cid = "runtime.tool_declaration_accuracy"
    m = run.s.manifest
    if m is None:
        return _r(cid, "skip", ["unmet dependency: static.manifest"])
    status, tools = _post_mcp(run.s)
    served = sorted(tools) if tools is not None else []
    declared = sorted(m.capabilities.declared_tools)
    if tools is None and not declared:
        return _r(cid, "pass", [f"the env serves no MCP tools (POST /mcp: {status}) and declares none"])
    if served == declared:
        return _r(cid, "pass", [f"tools/list names exactly the declared tools: {', '.join(declared)}"], tools=served)
    return _r(
        cid,
        "fail",
        [f"declared {declared}, but tools/list names {served}"],
        "list exactly the served tools in validation.capabilities.declared_tools",
        declared=declared,
        served=served,
    )


def _post_mcp(s: RuntimeSubject) -> tuple[int, list[str] | None]:
    status, body = _get(s, "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    result = body.get("result") if isinstance(body, dict) else None
    if status != 200 or not isinstance(result, dict) or not isinstance(result.get("tools"), list):
        return status, None
    return status, [str(t.get("name")) for t in result["tools"] if isinstance(t, dict)]


def _tasks(run: _Run) -> ResultV2 | None:
    cid = "runtime.task_declaration_accuracy"
    m = run.s.manifest
    if m is None or not (m.capabilities.task_api or m.capabilities.declared_task_count):
        return None  # not applicable: the env declares no tasks
    status, names = _get(run.s, "/list_environments")
    if status != 200 or not isinstance(names, list) or not names:
        return _r(
            cid, "fail", [f"GET /list_environments answered {status}"], "serve the Task API (Environment.list_tasks)"
        )
    name = str(names[0])
    counts: dict[str, int] = {}
    problems = []
    for split, want in sorted(m.capabilities.declared_task_count.items()):
        status, body = _get(run.s, f"/{name}/num_tasks", {"split": split})
        got = body.get("num_tasks") if isinstance(body, dict) else None
        counts[split] = got if isinstance(got, int) else -1
        if got != want:
            problems.append(f"split {split!r}: declared {want} tasks, the server has {got} (status {status})")
    return _held(
        cid,
        problems,
        f"every declared split has its declared count: {counts}",
        "declare the task counts the Task API serves (validation.capabilities.declared_task_count)",
        served=counts,
    )


def _unmeasured(check_id: str, what: str) -> ResultV2:
    return _r(
        check_id,
        "skip",
        [
            f"{what}: a measurement of the env's container, which a server checked from here does not give; the "
            "Hub makes it on each revision's container (docs/validate.md)"
        ],
    )


def _oracle_reward(run: _Run) -> tuple[ResultV2 | None, float | None]:
    cid = "semantic.oracle_max"
    m = run.s.manifest
    if m is None:
        return _r(cid, "skip", ["unmet dependency: static.manifest"]), None
    oracle = m.capabilities.oracle
    if oracle is None:
        return _r(
            cid, "fail", ["no oracle is declared"], "declare capabilities.oracle: a plan that earns the top reward"
        ), None
    if oracle.form != "script":
        return _r(cid, "skip", ["an injected_state oracle is not supported by this validator"]), None
    if run.oracle_error:
        return _r(cid, "fail", [run.oracle_error], "fix the oracle plan"), None
    if not run.oracle_runs or run.oracle_runs[0].failure:
        why = run.oracle_runs[0].failure if run.oracle_runs else "it was not played"
        return _r(cid, "fail", [f"the oracle's episode failed: {why}"], "see runtime.startup"), None
    return None, run.oracle_runs[0].last_reward()


def _oracle_max(run: _Run) -> ResultV2:
    early, reward = _oracle_reward(run)
    if early is not None:
        return early
    assert run.s.manifest is not None
    high, tol = run.s.manifest.reward.range[1], run.s.manifest.reward.oracle_tolerance
    good = reward is not None and reward >= high - tol
    return _r(
        "semantic.oracle_max",
        "pass" if good else "fail",
        [f"the oracle's last reward is {reward}, the range's top {high:g} (tolerance {tol:g})"],
        None if good else "make the oracle plan reach the top reward, or declare the range the env really reaches",
        oracle_reward=reward,
        max=high,
        oracle_tolerance=tol,
    )


def _canaries(run: _Run) -> tuple[ResultV2 | None, list[float | None]]:
    m = run.s.manifest
    if m is None:
        return _r("semantic.canary_floor", "skip", ["unmet dependency: static.manifest"]), []
    if not m.capabilities.canaries:
        return _r("semantic.canary_floor", "skip", ["no canaries are declared (capabilities.canaries)"]), []
    if run.canaries_error:
        return _r("semantic.canary_floor", "fail", [run.canaries_error], "fix the canaries file"), []
    failed = [t.failure for t in run.canary_runs if t.failure]
    if failed:
        return _r(
            "semantic.canary_floor", "fail", [f"a canary's episode failed: {failed[0]}"], "see runtime.startup"
        ), []
    return None, [t.last_reward() for t in run.canary_runs]


def _canary_floor(run: _Run) -> ResultV2:
    early, rewards = _canaries(run)
    if early is not None:
        return early
    assert run.s.manifest is not None
    low, margin = run.s.manifest.reward.range[0], run.s.manifest.reward.floor_margin
    high_ones = [r for r in rewards if r is None or r > low + margin]
    return _r(
        "semantic.canary_floor",
        "fail" if high_ones else "pass",
        [
            f"{len(rewards)} canaries' last rewards {rewards}: "
            + ("some score above" if high_ones else "all within")
            + f" the floor {low:g} + {margin:g}"
        ],
        "a canary (deliberately bad play) must not be rewarded: check the reward function" if high_ones else None,
        canary_rewards=rewards,
    )


def _floor_gap(run: _Run) -> ResultV2:
    cid = "semantic.floor_gap"
    early, oracle = _oracle_reward(run)
    if early is not None:
        return _r(cid, "skip", ["unmet dependency: semantic.oracle_max"])
    early_c, rewards = _canaries(run)
    if early_c is not None:
        return _r(cid, "skip", ["unmet dependency: semantic.canary_floor"])
    assert run.s.manifest is not None and oracle is not None
    margin = run.s.manifest.reward.floor_margin
    floor = max((r for r in rewards if r is not None), default=None)
    good = floor is not None and oracle - floor >= margin
    return _r(
        cid,
        "pass" if good else "fail",
        [
            f"the oracle's {oracle:g} is {oracle - floor if floor is not None else '?'} above the canaries' best {floor}; "
            f"the declared margin is {margin:g}"
        ],
        None if good else "the best bad play must stay floor_margin below the oracle",
        oracle_reward=oracle,
        measured_floor=floor,
        floor_margin=margin,
    )


def _verifier_determinism(run: _Run) -> ResultV2:
    cid = "semantic.verifier_determinism"
    early, _ = _oracle_reward(run)
    if early is not None:
        return _r(cid, "skip", ["unmet dependency: semantic.oracle_max"])
    rewards = [t.last_reward() for t in run.oracle_runs]
    same = len(set(rewards)) == 1 and not any(t.failure for t in run.oracle_runs)
    return _r(
        cid,
        "pass" if same else "fail",
        [f"the oracle played {len(rewards)} times was rewarded {rewards}"],
        None if same else "the reward of the same play must not change between runs",
        rewards=rewards,
    )


def _replayability(run: _Run) -> ResultV2:
    cid = "semantic.replayability"
    early, _ = _oracle_reward(run)
    if early is not None:
        return _r(cid, "skip", ["unmet dependency: semantic.oracle_max"])
    if run.s.stochastic:
        return _r(cid, "skip", ["the env declares stochastic outcomes (validation.stochastic: true)"])
    a, b = (t.outcome(run.s.varying_fields) for t in run.oracle_runs[:2])
    same = a == b
    return _r(
        cid,
        "pass" if same else "fail",
        [f"the oracle's recorded episode replayed gives {'the same' if same else 'another'} {len(a)} observations"],
        None if same else "make the episode a function of reset's seed and the actions",
    )


_ANSWER_MIN_CHARS = 4  # shorter text ("up", "hit", "e4") is a move's name, not an answer to give away


def _texts(value: Any) -> set[str]:
    """Every string leaf of a JSON value."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_texts(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_texts(v) for v in value)) if value else set()
    return set()


def _shown(value: Any) -> list[str]:
    """The text a reply shows on its own: its string leaves, less the members of lists of two or
    more strings (a list of choices, such as the legal moves, names the answer among others and so
    gives nothing away)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _shown(v)]
    if isinstance(value, list):
        if sum(isinstance(v, str) for v in value) >= 2:
            return [t for v in value if not isinstance(v, str) for t in _shown(v)]
        return [t for v in value for t in _shown(v)]
    return []


def _no_solution_leakage(run: _Run) -> ResultV2:
    """The oracle's answers are not in what the agent is shown when its episode begins (the reset's
    reply and the state read before the first action). An answer is text of an oracle action (4
    characters or more) that no canary sends; it leaks when shown there as text of its own (not one
    choice in a list) while the same episode begun from the next seed does not show it (what every
    episode shows, such as the opening's legal moves, gives nothing away)."""
    cid = "semantic.no_solution_leakage"
    early, _ = _oracle_reward(run)
    if early is not None or run.oracle is None:
        return _r(cid, "skip", ["unmet dependency: semantic.oracle_max"])
    wrong = set().union(*(_texts(a) for c in run.canaries for a in c.actions)) if run.canaries else set()
    answers = sorted({t for a in run.oracle.actions for t in _texts(a) if len(t) >= _ANSWER_MIN_CHARS} - wrong)
    if not answers:
        return _r(
            cid,
            "skip",
            [
                f"the oracle's actions hold no text answer ({_ANSWER_MIN_CHARS} characters or more, sent by no canary) to look for"
            ],
        )
    elsewhere = run.oracle_elsewhere
    if elsewhere is None or elsewhere.failure:
        why = elsewhere.failure if elsewhere is not None else "not played"
        return _r(cid, "skip", [f"the oracle from the next seed could not be played: {why}"])
    shown = _opening(run.oracle_runs[0])
    shown_elsewhere = _opening(elsewhere)
    leaks = [
        f"the answer {a[:60]!r} (an oracle action's) is shown when the episode begins, before it is sent"
        for a in answers
        if a in shown and a not in shown_elsewhere
    ]
    return _held(
        cid,
        leaks,
        f"none of the oracle's {len(answers)} answers is shown when its episode begins",
        "keep the answer out of the first observation and the state (give it only once the episode ends)",
        answers=len(answers),
    )


def _opening(t: Transcript) -> str:
    """What an episode shows before its first action: the reset's reply and any state read then."""
    shown: list[str] = []
    for op, _, reply in t.exchanges:
        if op == "step":
            break
        shown += _shown(reply)
    return "\n".join(shown)


_RUBRIC_CHECKS = ("runtime.rubric_introspectable", "runtime.reward_attribution")


def runtime_results(s: RuntimeSubject) -> list[ResultV2]:
    """The runtime (and, at the semantic level, semantic) results for the server at `s.url`."""
    from openenv.client.sync import run_sync

    started = time.perf_counter()
    up, lines = _started(s)
    startup = _r(
        "runtime.startup",
        "pass" if up else "fail",
        lines,
        None if up else "start the server yourself (`openenv serve PATH`) to see its error",
        local_process=s.local_process,
    )
    startup.duration_s = round(time.perf_counter() - started, 4)
    out = [startup]
    wanted = list(s.policy.lane("local"))
    if not up:
        for cid in wanted:
            level = s.policy.entries[cid].level
            if cid != "runtime.startup" and Level.RUNTIME <= level <= s.level:
                out.append(_r(cid, "skip", ["unmet dependency: runtime.startup"]))
        return out
    run = _Run(s)
    run_sync(run.gather())
    graders: dict[str, Any] = {
        "runtime.reward_well_formed": _reward_well_formed,
        "runtime.observation_schema": _observation_schema,
        "runtime.state_contract": _state_contract,
        "runtime.trajectory_record": _trajectory_record,
        "runtime.rubric_introspectable": _rubric_introspectable,
        "runtime.reward_attribution": _reward_attribution,
        "runtime.tool_declaration_accuracy": _tools,
        "runtime.task_declaration_accuracy": _tasks,
        "runtime.seed_control": _seed_control,
        "runtime.episode_determinism": _determinism,
        "runtime.network_policy": lambda r: _unmeasured("runtime.network_policy", "what the env's network reaches"),
        "runtime.host_containment": lambda r: _unmeasured(
            "runtime.host_containment", "what the env can touch of its host"
        ),
        "runtime.resource_bounds": lambda r: _unmeasured(
            "runtime.resource_bounds", "the env's memory, CPU and process use"
        ),
        "runtime.episode_isolation": _isolation,
        "runtime.oracle_containment": lambda r: _unmeasured(
            "runtime.oracle_containment", "whether the agent can read the oracle"
        ),
        "semantic.oracle_max": _oracle_max,
        "semantic.floor_gap": _floor_gap,
        "semantic.canary_floor": _canary_floor,
        "semantic.verifier_determinism": _verifier_determinism,
        "semantic.no_solution_leakage": _no_solution_leakage,
        "semantic.verifier_portability": lambda r: _r(
            "semantic.verifier_portability",
            "skip",
            [
                "needs the oracle and canaries rewarded on a second machine: the Hub plays them there (its setting "
                "cross_host_engine)"
            ],
        ),
        "semantic.replayability": _replayability,
        "semantic.resource_envelope": lambda r: _unmeasured(
            "semantic.resource_envelope", "the resources an episode uses"
        ),
    }
    for cid in wanted:
        level = s.policy.entries[cid].level
        if cid == "runtime.startup" or not Level.RUNTIME <= level <= s.level:
            continue
        if cid in _RUBRIC_CHECKS and not (s.manifest and s.manifest.capabilities.rubric_tree):
            continue  # not applicable: the env declares no rubric tree
        t0 = time.perf_counter()
        grader = graders.get(cid)
        if grader is None:
            result: ResultV2 | None = _r(cid, "skip", ["not implemented in this build"])
        else:
            try:
                result = grader(run)
            except Exception as exc:  # a bug in a check: fail closed and say so
                result = _r(cid, "error", [f"the check crashed: {type(exc).__name__}: {exc}"])
        if result is None:
            continue
        result.duration_s = round(time.perf_counter() - t0, 4)
        out.append(result)
    return out
