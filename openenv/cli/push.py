"""`openenv push [PATH]`: publish an environment as a Hugging Face Docker Space."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from openenv.cli._env import env_folder
from openenv.cli._output import CliError, Output
from openenv.cli._pairs import add_space_settings, space_settings

DESCRIPTION = """Publish an environment folder as a Docker Space: create the Space if needed, upload the
folder (README front matter set to sdk: docker, app_port and the `openenv` tag), and set its
variables and secrets. The folder is validated first. Uses HF_TOKEN (and HF_ENDPOINT if set)."""

EXAMPLES = """
openenv push my_env                                  # to <you>/my_env
openenv push my_env --repo-id my-org/my_env --private
openenv push . --create-pr -m "Harder levels"        # a pull request instead of main
openenv push . --var LEVEL=3 --secret OPENAI_API_KEY # a bare secret name reads $OPENAI_API_KEY
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="the env folder (default: the current folder)")
    parser.add_argument(
        "--repo-id", help="the Space: owner/name, or a name under your user (default: the manifest's name)"
    )
    parser.add_argument("--private", action="store_true", default=None, help="create the Space private")
    parser.add_argument("--create-pr", action="store_true", help="upload as a pull request")
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="leave matching files out (repeatable)"
    )
    add_space_settings(parser)
    parser.add_argument("-m", "--message", help="the commit message")
    parser.add_argument("--no-validate", action="store_true", help="push even if `openenv validate` fails")
    parser.add_argument("--dry-run", action="store_true", help="show what would be uploaded, upload nothing")
    parser.add_argument("--token", help="Hugging Face token (default: HF_TOKEN or the saved login)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.spaces import HubRequestError, push_space, stage_folder

    root, manifest = env_folder(args.path)
    variables, secrets = space_settings(args)
    if args.dry_run:
        with tempfile.TemporaryDirectory(prefix="openenv-push-") as tmp:
            files = stage_folder(root, manifest, Path(tmp), args.exclude)
        if args.json:
            out.json(
                {
                    "dry_run": True,
                    "files": files,
                    "variables": {**manifest.variables, **variables},
                    "secrets": sorted(secrets),
                }
            )
        else:
            out.line(f"would upload {len(files)} files of {manifest.name}:")
            for f in files:
                out.line(f"  {f}")
        return 0
    if not args.no_validate:
        from openenv.validation import validate_folder

        with out.status(f"validating {root}"):
            report = validate_folder(root)
        if report.status not in ("pass", "warn"):
            for c in report.problems():
                out.mark(
                    "fail" if c.status == "fail" else "warn",
                    c.one_line(),
                    f"fix: {c.remediation}" if c.remediation else None,
                )
            raise CliError(
                f"{manifest.name} does not pass validation ({report.summary.failed} failed)",
                "fix the problems above, or push anyway with --no-validate",
            )
    with out.status(f"pushing {root} to the Hub"):
        try:
            result = push_space(
                root,
                repo_id=args.repo_id,
                private=args.private,
                create_pr=args.create_pr,
                excludes=args.exclude,
                variables=variables,
                secrets=secrets,
                commit_message=args.message,
                token=args.token,
            )
        except HubRequestError as exc:
            raise CliError(str(exc)) from None
    if args.json:
        out.json(result.as_dict())
        return 0
    what = f"pull request {result.pr_url}" if result.pr_url else f"commit {(result.commit or '')[:12]}"
    out.mark("ok", f"pushed {len(result.files)} files to {result.repo_id} ({what})")
    out.line(f"  Space: {result.url}")
    out.line(f"  App:   {result.app_url}" + (f"  (stage: {result.stage})" if result.stage else ""))
    if result.variables or result.secrets:
        out.line(f"  set variables: {', '.join(result.variables) or '-'}; secrets: {', '.join(result.secrets) or '-'}")
    for note in result.notes:
        out.mark("warn", note)
    return 0
