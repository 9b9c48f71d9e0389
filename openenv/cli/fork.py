"""`openenv fork SRC`: duplicate a Space into your account."""

from __future__ import annotations

import argparse

from openenv.cli._output import CliError, Output
from openenv.cli._pairs import add_space_settings, space_settings

DESCRIPTION = """Duplicate a Space (its files, and the variables/secrets you pass) into your account or an
organization. Uses HF_TOKEN (and HF_ENDPOINT if set); works with huggingface_hub 1.x and 2.x."""

EXAMPLES = """
openenv fork openenv/echo_env                          # to <you>/echo_env
openenv fork https://huggingface.co/spaces/openenv/echo_env --repo-id my-org/echo_env --private
openenv fork openenv/chess_env --var LEVEL=hard --secret OPENAI_API_KEY
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="the Space to fork: owner/name or its page URL")
    parser.add_argument(
        "--repo-id", help="the new Space: owner/name, or a name under your user (default: the source's name)"
    )
    parser.add_argument("--private", action="store_true", default=None, help="make the new Space private")
    parser.add_argument("--hardware", help="hardware for the new Space, e.g. cpu-basic")
    add_space_settings(parser)
    parser.add_argument("--token", help="Hugging Face token (default: HF_TOKEN or the saved login)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.errors import ConfigurationError
    from openenv.spaces import HubRequestError, fork_space

    variables, secrets = space_settings(args)
    with out.status(f"forking {args.source}"):
        try:
            result = fork_space(
                args.source,
                repo_id=args.repo_id,
                private=args.private,
                hardware=args.hardware,
                variables=variables,
                secrets=secrets,
                token=args.token,
            )
        except ConfigurationError as exc:
            raise CliError(str(exc), exit_code=2) from None
        except HubRequestError as exc:
            raise CliError(str(exc)) from None
    if args.json:
        out.json(result.as_dict())
        return 0
    out.mark("ok", f"forked {result.source} to {result.repo_id}")
    out.line(f"  Space: {result.url}")
    out.line(f"  App:   {result.app_url}" + (f"  (stage: {result.stage})" if result.stage else ""))
    return 0
