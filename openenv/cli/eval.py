"""`openenv eval OWNER/NAME --model M --base-url U`: score a chat model on an env, submit it to the Hub."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from openenv.cli._output import CliError, Output
from openenv.cli._pairs import positive_int as _positive

DESCRIPTION = """Play N episodes of an environment with a chat model behind an OpenAI-compatible endpoint
(chat/completions: vLLM, TGI, Ollama, HF Inference Providers, ...), print its mean return with a
95% interval, and submit the run to the OpenEnv Hub service's leaderboard for the env.

The env is resolved through the Hub service (--hub or OPENENV_HUB_URL): its running endpoint, or
with --trust-remote-code a local container of the image the Hub built. Submitting needs your
Hugging Face token (--token or HF_TOKEN): the Hub records your user name with the run. Only the
model endpoint's host is submitted, never its path or key."""

EXAMPLES = """
openenv eval openenv/echo_env --model meta-llama/Llama-3.1-8B-Instruct --base-url https://router.huggingface.co/v1
openenv eval owner/name --model qwen2.5:7b --base-url http://127.0.0.1:11434/v1 --episodes 20 --max-steps 50
openenv eval owner/name@3f2a9c1 --model m --base-url http://127.0.0.1:8000/v1 --no-submit --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env", metavar="OWNER/NAME[@REVISION]", help="the environment to evaluate on")
    parser.add_argument("--model", required=True, help="the model's name as its endpoint knows it")
    parser.add_argument(
        "--base-url",
        required=True,
        metavar="URL",
        help="the endpoint's OpenAI-compatible base URL (usually ends in /v1)",
    )
    parser.add_argument(
        "--api-key", help="the endpoint's key (default: OPENAI_API_KEY; for Hugging Face hosts, your HF token)"
    )
    parser.add_argument(
        "--episodes",
        type=_positive,
        default=10,
        metavar="N",
        help="episodes to play (default 10; the Hub takes at most 1000)",
    )
    parser.add_argument(
        "--max-steps", type=_positive, default=50, metavar="S", help="turns per episode at most (default 50)"
    )
    parser.add_argument(
        "--revision", help="the revision (sha) to evaluate; default: the env's current passing revision"
    )
    parser.add_argument(
        "--seed", type=int, help="seed of the first episode (the next ones count up); default: the env's own"
    )
    parser.add_argument("--hub", metavar="URL", help="the OpenEnv Hub service (default: OPENENV_HUB_URL)")
    parser.add_argument(
        "--token", help="your Hugging Face token, to submit the run (default: HF_TOKEN or the saved login)"
    )
    parser.add_argument("--no-submit", action="store_true", help="only print the score")
    parser.add_argument(
        "--trust-remote-code",
        action="store_true",
        default=None,
        help="allow running the env's image (or files) on this machine when it runs nowhere else",
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="seconds to wait for each model answer (default 60)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON document")


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.cli._settings import model_api_key
    from openenv.client import _settings as client_settings
    from openenv.client._hub_service import HubServiceError, fetch_record
    from openenv.client.env_id import parse_env_id
    from openenv.errors import ConfigurationError
    from openenv.evaluation import EvalSubmitError, revision_state, submit_eval

    hub = (args.hub or client_settings.hub_url() or "").strip().rstrip("/")
    if not hub:
        raise CliError(
            "no OpenEnv Hub service to resolve the env through", "pass --hub URL or set OPENENV_HUB_URL", exit_code=2
        )
    try:
        env_id = parse_env_id(args.env, args.revision)
    except ConfigurationError as exc:
        raise CliError(str(exc), exit_code=2) from None
    token = None if args.no_submit else (args.token or client_settings.hf_token())
    if not args.no_submit and not token:
        raise CliError(
            "submitting the score needs your Hugging Face token",
            "pass --token or set HF_TOKEN (or add --no-submit to only print the score)",
            exit_code=2,
        )
    api_key = (
        args.api_key
        or model_api_key()
        or (client_settings.hf_token() if client_settings.is_hf_host(args.base_url) else None)
    )
    try:
        record = fetch_record(hub, env_id.repo_id, env_id.revision, token=None)
    except HubServiceError as exc:
        unknown = "does not know" in str(exc)
        raise CliError(
            str(exc), f"check the id; search the Hub with {hub}/api/v1/envs?q={env_id.name}" if unknown else None
        ) from None
    if not record.sha:
        raise CliError(
            f"{hub} gives no revision for {env_id.repo_id}", "it may not have passed the Hub's checks yet; try later"
        )
    if not args.no_submit:  # the Hub takes evals only of revisions that passed its checks: say so before playing
        state = revision_state(hub, env_id.repo_id, record.sha)
        if state is not None and state != "passed":
            raise CliError(
                f"{env_id.repo_id}@{record.sha[:12]} is {state}: the Hub takes evals only of revisions that passed its checks",
                "evaluate a passing revision (leave --revision out for the current one), or add --no-submit",
            )
    result = asyncio.run(_play(args, out, hub, env_id.repo_id, record.sha, api_key))
    mean, low, high = result.mean, result.ci_low, result.ci_high
    document: dict[str, Any] = {
        "env": env_id.repo_id,
        "revision": record.sha,
        "model": args.model,
        "episodes": len(result.returns),
        "returns": result.returns,
        "mean_return": mean,
        "ci_low": low,
        "ci_high": high,
        "invalid_turns": result.invalid,
        "steps": result.steps,
        "submitted": None,
    }
    if not args.json:
        out.mark(
            "ok",
            f"{args.model} on {env_id.repo_id}@{record.sha[:12]}: mean return {mean:.4g} ± {(high - low) / 2:.3g} "
            f"(95% interval {low:.4g} to {high:.4g}) over {len(result.returns)} episodes",
            f"unusable answers: {result.invalid} of {result.steps} turns",
        )
    if not args.no_submit:
        assert token is not None
        try:
            stored = submit_eval(
                hub,
                env_id.repo_id,
                token=token,
                model=args.model,
                base_url=args.base_url,
                revision=record.sha,
                returns=result.returns,
                max_steps=args.max_steps,
            )
        except EvalSubmitError as exc:
            if args.json:
                out.json(document)
            hint = (
                "your token was not accepted: check --token / HF_TOKEN (a token from your Hugging Face settings)"
                if exc.status == 401
                else "the score above was not submitted; rerun to try again"
            )
            raise CliError(f"submitting failed: {exc}", hint) from None
        document["submitted"] = stored
        if not args.json:
            out.mark(
                "ok",
                f"submitted as {stored.get('submitted_by')}: {hub}/api/v1/envs/{env_id.repo_id}/leaderboard",
                f"on the website: {hub}/?env={env_id.repo_id}",
            )
    if args.json:
        out.json(document)
    return 0


async def _play(args: argparse.Namespace, out: Output, hub: str, repo_id: str, sha: str, api_key: str | None) -> Any:
    from openenv import GenericEnvClient
    from openenv.errors import RemoteCodeError, ResolutionError
    from openenv.evaluation import ChatPolicy, ModelEndpointError, evaluate, fetch_action_schema

    ChatPolicy(args.base_url, args.model)  # a malformed base URL is refused before any env starts
    try:
        with out.status(f"starting {repo_id}@{sha[:12]}"):
            env = await GenericEnvClient.from_hub(
                repo_id, revision=sha, hub_url=hub, trust_remote_code=args.trust_remote_code
            )
    except RemoteCodeError as exc:
        raise CliError(str(exc), "add --trust-remote-code to run the image the Hub built on this machine") from None
    except ResolutionError as exc:
        raise CliError(str(exc), "the env runs nowhere this machine can reach; try again when its Space runs") from None
    async with env:
        policy = ChatPolicy(
            args.base_url,
            args.model,
            api_key=api_key,
            action_schema=await fetch_action_schema(env.base_url),
            env_name=repo_id,
            timeout_s=args.timeout,
        )

        def episode_done(episode: int, total: float, steps: int) -> None:
            out.mark("info", f"episode {episode}/{args.episodes}: return {total:.4g} in {steps} turns")

        try:
            return await evaluate(
                env, policy, episodes=args.episodes, max_steps=args.max_steps, seed=args.seed, on_episode=episode_done
            )
        except ModelEndpointError as exc:
            raise CliError(str(exc), "nothing was scored or submitted") from None
