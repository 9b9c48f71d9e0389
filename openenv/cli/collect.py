"""`openenv collect OWNER/NAME|URL -n N -o DIR`: rollouts into a JSONL dataset, resumable."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from openenv.cli._output import CliError, Output
from openenv.cli._pairs import positive_int as _positive

DESCRIPTION = """Play N episodes of an environment with a policy, on many sessions at once (the rollout
engine), and write them to DIR as results.jsonl (one episode per line: chat messages, the tool
trace, rewards) and metadata.json: the layout upstream OpenEnv's `openenv collect` writes, and a
file `datasets.load_dataset("json", data_files="DIR/results.jsonl")` reads as one table.

The env is a server URL, or OWNER/NAME[@REVISION] resolved through the OpenEnv Hub service
(--hub / OPENENV_HUB_URL). Rerunning with the same DIR plays only the episodes it lacks, with
the seeds they would have had. Policies: random and scripted (the first legal action) need a
finite action space; openai asks an OpenAI-compatible endpoint (--base-url, --model).
--push uploads DIR to a Hugging Face dataset repo (HF_TOKEN, HF_ENDPOINT)."""

EXAMPLES = """
openenv collect http://127.0.0.1:8000 -n 100 -o rollouts/ --policy random
openenv collect openenv/blackjack_env -n 1000 -o bj/ --concurrency 32 --hub http://127.0.0.1:7860
openenv collect openenv/wordle_env -n 50 -o wordle/ --policy openai --model qwen2.5:7b --base-url http://127.0.0.1:11434/v1
openenv collect http://127.0.0.1:8000 -n 100 -o rollouts/ --push alice/blackjack-rollouts
"""

POLICIES = ("random", "scripted", "openai")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env", metavar="OWNER/NAME[@REVISION]|URL", help="the environment: a Hub id or a server URL")
    parser.add_argument("-n", "--episodes", type=_positive, default=10, metavar="N", help="episodes (default 10)")
    parser.add_argument("-o", "--output", type=Path, required=True, metavar="DIR", help="folder for the dataset")
    parser.add_argument("--policy", choices=POLICIES, default="random", help="who plays (default random)")
    parser.add_argument("--concurrency", type=_positive, default=8, metavar="C", help="sessions at once (default 8)")
    parser.add_argument("--max-turns", type=_positive, default=100, metavar="T", help="actions per episode at most")
    parser.add_argument("--seed", type=int, default=0, help="seed of episode 0; episode i gets seed+i (default 0)")
    parser.add_argument("--episode-id-prefix", default="ep", metavar="P", help="episode ids are P-000000, ...")
    parser.add_argument("--no-resume", action="store_true", help="refuse a DIR that already holds episodes")
    llm = parser.add_argument_group("openai policy")
    llm.add_argument("--model", help="the model's name as its endpoint knows it")
    llm.add_argument("--base-url", metavar="URL", help="the endpoint's OpenAI-compatible base URL (ends in /v1)")
    llm.add_argument("--api-key", help="the endpoint's key (default: OPENAI_API_KEY)")
    llm.add_argument("--system-prompt", help="what the model is told first (default: how to answer)")
    llm.add_argument("--temperature", type=float, default=0.7)
    llm.add_argument("--max-tokens", type=_positive, default=200)
    hub = parser.add_argument_group("resolving and pushing")
    hub.add_argument("--hub", metavar="URL", help="the OpenEnv Hub service (default: OPENENV_HUB_URL)")
    hub.add_argument("--revision", help="the revision (sha) to collect from; default: the current passing one")
    hub.add_argument(
        "--trust-remote-code",
        action="store_true",
        default=None,
        help="allow running the env's image on this machine when it runs nowhere else",
    )
    hub.add_argument("--push", metavar="REPO_ID", help="upload DIR to this Hugging Face dataset repo afterwards")
    hub.add_argument("--private", action="store_true", help="create the dataset repo private")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON document")


def run(args: argparse.Namespace, out: Output) -> int:
    if args.policy == "openai" and not (args.model and args.base_url):
        raise CliError("the openai policy needs --model and --base-url", exit_code=2)
    summary = asyncio.run(_collect(args, out))
    if args.push:
        from openenv.cli._collect_push import push_dataset

        with out.status(f"pushing {args.output} to the dataset {args.push}"):
            summary["pushed"] = push_dataset(args.output, args.push, private=args.private)
    if args.json:
        out.json(summary)
        return 0
    out.mark(
        "ok",
        f"{summary['collected']} episodes collected, {summary['skipped']} already there: {summary['output']}",
        f"{summary['episodes_per_s']:.2f} episodes/s, mean reward {summary['mean_reward']:.4g}, "
        f"{summary['errors']} ended in an error",
    )
    if args.push:
        out.mark("ok", f"pushed to {summary['pushed']}")
    return 0


async def _collect(args: argparse.Namespace, out: Output) -> dict[str, Any]:
    from openenv.errors import ConfigurationError, OpenEnvError

    env_name, url, revision, client = await _target(args, out)
    try:
        from openenv.evaluation import fetch_action_schema
        from openenv.training.collect import RolloutFolder, collect_rollouts
        from openenv.training.engine import RolloutEngine

        schema = await fetch_action_schema(url)
        policy, parse = _policy(args, schema)
        engine = RolloutEngine(url, policy, concurrency=args.concurrency, max_turns=args.max_turns, parse_action=parse)
        folder = RolloutFolder(args.output.expanduser())
        folder.write_metadata(_metadata(args, env_name, url, revision))
        with _Bar(out, args.episodes) as bar:
            progress = await collect_rollouts(
                engine,
                folder,
                args.episodes,
                env=env_name,
                revision=revision,
                prefix=args.episode_id_prefix,
                base_seed=args.seed,
                resume=not args.no_resume,
                on_progress=bar.update,
            )
    except ConfigurationError as exc:
        raise CliError(str(exc), exit_code=2) from None
    except ExceptionGroup as group:  # the engine's task group: a policy's refusal ends the run
        refused = group.subgroup(ConfigurationError)
        if refused is None:
            raise
        raise CliError(str(_first(refused)), exit_code=2) from None
    except OpenEnvError as exc:
        raise CliError(str(exc), "the episodes written so far are kept; rerun the same command to go on") from None
    finally:
        if client is not None:
            await client.close()
    rows = list(folder.rows())
    rewards = [float(row["reward"]) for row in rows]
    return {
        "env": env_name,
        "revision": revision,
        "output": str(folder.folder),
        "collected": progress.done,
        "skipped": progress.skipped,
        "episodes": len(rows),
        "episodes_per_s": round(progress.episodes_per_s, 3),
        "mean_reward": sum(rewards) / len(rewards) if rewards else 0.0,
        "errors": sum(1 for row in rows if row["metrics"]["status"] in ("error", "failed")),
        "pushed": None,
    }


def _first(group: BaseException) -> BaseException:
    while isinstance(group, BaseExceptionGroup):
        group = group.exceptions[0]
    return group


async def _target(args: argparse.Namespace, out: Output) -> tuple[str, str, str | None, Any]:
    """(the env's name, a server URL, its revision, a client to close afterwards or None)."""
    if args.env.startswith(("http://", "https://")):
        return args.env.rstrip("/"), args.env.rstrip("/"), args.revision, None
    from openenv import GenericEnvClient
    from openenv.client import _settings as client_settings
    from openenv.client.env_id import parse_env_id
    from openenv.errors import ConfigurationError, RemoteCodeError, ResolutionError

    hub = (args.hub or client_settings.hub_url() or "").strip().rstrip("/")
    if not hub:
        raise CliError("no OpenEnv Hub service to resolve the env through", "pass --hub URL or a server URL", 2)
    try:
        env_id = parse_env_id(args.env, args.revision)
    except ConfigurationError as exc:
        raise CliError(str(exc), exit_code=2) from None
    try:
        with out.status(f"starting {env_id.repo_id}"):
            client = await GenericEnvClient.from_hub(
                env_id.repo_id, revision=env_id.revision, hub_url=hub, trust_remote_code=args.trust_remote_code
            )
    except RemoteCodeError as exc:
        raise CliError(str(exc), "add --trust-remote-code to run the image the Hub built on this machine") from None
    except ResolutionError as exc:
        raise CliError(str(exc), "the env runs nowhere this machine can reach; try again when it runs") from None
    revision = getattr(client, "revision", None) or env_id.revision
    return env_id.repo_id, str(client.base_url).rstrip("/"), revision, client


def _policy(args: argparse.Namespace, schema: dict[str, Any]) -> tuple[Any, Any]:
    from openenv.training.collect import random_policy, scripted_policy, text_to_action

    if args.policy == "random":
        return random_policy(schema), None
    if args.policy == "scripted":
        return scripted_policy(schema), None
    try:
        from openenv.training.openai_policy import OpenAIPolicy
    except ImportError:
        raise CliError("the openai policy needs the openai package", "pip install 'openenv-hub[training]'") from None
    prompt = args.system_prompt or (
        "You act in a reinforcement-learning environment. Each turn you see the observation. Reply with one "
        f"action: a JSON object valid against this schema, and nothing else. Schema: {schema}"
    )
    policy = OpenAIPolicy(
        args.model,
        base_url=args.base_url,
        api_key=args.api_key,
        system_prompt=prompt,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
    )
    return policy, text_to_action(schema)


def _metadata(args: argparse.Namespace, env: str, url: str, revision: str | None) -> dict[str, Any]:
    from openenv import __version__

    return {
        "env": env,
        "env_base_url": url,
        "revision": revision,
        "provider": {"openai": "openai-compatible"}.get(args.policy, args.policy),
        "model": args.model,
        "llm_endpoint": args.base_url,
        "temperature": args.temperature if args.policy == "openai" else None,
        "num_episodes_requested": args.episodes,
        "max_turns": args.max_turns,
        "concurrency": args.concurrency,
        "base_seed": args.seed,
        "episode_id_prefix": args.episode_id_prefix,
        "collector": f"openenv-hub {__version__}",
    }


class _Bar:
    """A progress bar with episodes/s (rich), or a line per round without a terminal."""

    def __init__(self, out: Output, total: int) -> None:
        self.out, self.total = out, total
        self.progress: Any = None
        self.task: Any = None

    def __enter__(self) -> _Bar:
        if self.out.rich:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("collecting"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]} episodes/s"),
                TimeElapsedColumn(),
                console=self.out.console,
            )
            self.progress.start()
            self.task = self.progress.add_task("collect", total=self.total, rate="-")
        return self

    def update(self, state: Any) -> None:
        done = state.skipped + state.done
        if self.progress is not None:
            self.progress.update(self.task, completed=done, rate=f"{state.episodes_per_s:.2f}")
        else:  # with --json this goes to stderr, as everything for people does
            self.out.line(f"collected {done}/{self.total} episodes ({state.episodes_per_s:.2f} episodes/s)")

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()
