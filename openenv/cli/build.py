"""`openenv build [PATH] [-t TAG] [--build-arg K=V]`: build an environment's Docker image."""

from __future__ import annotations

import argparse
import re

from openenv.cli._env import env_folder
from openenv.cli._output import CliError, Output
from openenv.cli._pairs import parse_pairs

DESCRIPTION = """Build an environment's image with the local container engine (Docker, or Podman with
OPENENV_CONTAINER_ENGINE=podman). Inside an SDK source checkout, an env whose Dockerfile takes
OPENENV_SDK gets a wheel of the local SDK, not the release."""

EXAMPLES = """
openenv build envs/echo_env
openenv build my_env -t my_env:dev --build-arg BASE_IMAGE=python:3.12-slim
openenv build . --base-image openenv-local/python:3.11 --json
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default=".", help="the env folder (default: the current folder)")
    parser.add_argument("-t", "--tag", help="image tag (default: openenv-<name>:latest)")
    parser.add_argument(
        "--build-arg", action="append", default=[], metavar="KEY=VALUE", help="a Docker build argument (repeatable)"
    )
    parser.add_argument(
        "--base-image",
        help="value of the Dockerfile's BASE_IMAGE argument (default: $OPENENV_BASE_IMAGE, else the Dockerfile's)",
    )
    parser.add_argument(
        "--sdk",
        choices=["auto", "local", "published"],
        default="auto",
        help="which SDK the image gets: auto (local source when in a checkout), local, or published",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show every line of the build output")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


_ALWAYS_SHOWN = ("base image ", "pulled base image ", "note: ", "the engine failed the build")
# A BuildKit step's first line: "#7 [2/4] RUN pip install ..." (not its output lines, "#7 1.23 ...").
_BUILDKIT_STEP = re.compile(r"^#\d+ \[[^\]]+\] ")


def default_tag(name: str) -> str:
    """A valid Docker tag for an env name: `openenv-<name>:latest`, lower-cased."""
    repo = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "env"
    return f"openenv-{repo}:latest"


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.cli._settings import cli_settings
    from openenv.images import ImageBuildError, build_image
    from openenv.validation._files import find_dockerfile

    root, manifest = env_folder(args.path)
    dockerfile = find_dockerfile(root)
    if dockerfile is None:
        raise CliError(
            f"no Dockerfile in {root.resolve()}", "add one (`openenv init` shows the shape) at the env's root"
        )
    tag = args.tag or default_tag(manifest.name)
    build_args = parse_pairs(args.build_arg, "--build-arg", any_key=True)
    base_image = args.base_image or cli_settings().base_image
    steps: list[str] = []

    def on_log(line: str) -> None:
        is_step = line.startswith("Step ") or _BUILDKIT_STEP.match(line) is not None
        if is_step:
            steps.append(line)
        # What the build decided about its base image is always said (a fallback, a stand-in, a pull).
        if args.verbose or is_step or line.startswith(_ALWAYS_SHOWN):
            out.line(line if is_step else f"    {line}", style=None if is_step else "dim")

    with out.status(f"building {tag} from {root}"):
        try:
            result = build_image(
                root,
                tag,
                build_args=build_args,
                base_image=base_image,
                sdk=args.sdk,
                on_log=on_log,
                dockerfile=str(dockerfile.relative_to(root)),
                labels={"org.openenv.name": manifest.name},
            )
        except ImageBuildError as exc:
            if exc.reason == ImageBuildError.BASE_IMAGE:
                raise CliError(str(exc), "openenv build --base-image IMAGE (or OPENENV_BASE_IMAGE=IMAGE)") from None
            if exc.infrastructure:
                from openenv.engines import engine

                raise CliError(str(exc), f"{engine().start_hint}, then build again") from None
            if exc.log and not args.verbose:
                for line in exc.log.splitlines()[-15:]:
                    out.line(f"    {line}", style="dim")
            raise CliError(str(exc), "see the build output above; --verbose shows all of it") from None
    if args.json:
        out.json(
            {
                "tag": result.tag,
                "image_id": result.image_id,
                "seconds": round(result.seconds, 2),
                "sdk": result.sdk,
                "builder": result.builder,
                "name": manifest.name,
                "port": manifest.port,
            }
        )
        return 0
    out.mark(
        "ok",
        f"built {result.tag} ({result.image_id[:19]}) in {result.seconds:.1f} s with {result.builder}, SDK: {result.sdk}",
    )
    out.line(f"  run it: docker run --rm -p 127.0.0.1:{manifest.port}:{manifest.port} {result.tag}")
    return 0
