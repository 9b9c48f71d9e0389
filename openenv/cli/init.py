"""`openenv init NAME`: render the Space template into a new, working environment folder."""

from __future__ import annotations

import argparse
import keyword
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from openenv.cli._output import CliError, Output

DESCRIPTION = """Create a new environment from the Space template: a working env (a number-guessing game)
with its models, server, client, Dockerfile, README front matter, openenv.yaml and tests. It passes
`openenv validate`, serves, builds, and its tests pass; change the game from there."""

EXAMPLES = """
openenv init my_env
openenv init envs/maze_env          # creates envs/maze_env
"""

# Names the env folder's own modules use, or that would shadow something important on import.
_RESERVED = frozenset({"openenv", "server", "models", "client", "tests", "test", "app", "env", "environment"})
_TEXT_SUFFIXES = frozenset({".py", ".md", ".txt", ".toml", ".yaml", ".yml", ".cfg", ".ini", ""})


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the env's name (snake_case, e.g. my_env), or a path ending in it")
    parser.add_argument("--json", action="store_true", help="print what was created as JSON")


def template_dir() -> Path:
    """The Space template (`openenv/cli/_template/`), the same in a checkout and in a wheel.

    Raises:
        CliError: the installation has no template.
    """
    packaged = Path(__file__).resolve().parent / "_template"
    if packaged.is_dir():
        return packaged
    raise CliError(
        "this installation of openenv-hub has no Space template", "reinstall it: pip install -U 'openenv-hub[cli]'"
    )


def check_name(name: str) -> None:
    """Refuse names that cannot be a Python package and a Space name.

    Raises:
        CliError: with a suggested name.
    """
    suggestion = re.sub(r"[^a-z0-9_]+", "_", name.lower()).strip("_")
    if suggestion and suggestion[0].isdigit():
        suggestion = f"env_{suggestion}"
    hint = (
        f"try `openenv init {suggestion}`"
        if suggestion and suggestion != name
        else "use lowercase letters, digits and '_'"
    )
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name):
        raise CliError(
            f"{name!r} is not a valid env name: use lowercase letters, digits and '_', starting with a letter",
            hint,
            exit_code=2,
        )
    if keyword.iskeyword(name) or name in sys.stdlib_module_names or name in _RESERVED:
        raise CliError(
            f"{name!r} would shadow a Python or OpenEnv module of the same name",
            "pick another name, e.g. my_env",
            exit_code=2,
        )


def class_prefix(name: str) -> str:
    """`echo_env` → `Echo`, `number_guess` → `NumberGuess` (the `_env` suffix is dropped)."""
    base = name[: -len("_env")] if name.endswith("_env") and len(name) > 4 else name
    return "".join(part.capitalize() for part in base.split("_") if part) or "My"


def render(dest: Path, name: str) -> list[str]:
    """Render the template for `name` into `dest` (which must not exist, or be empty).

    The folder is built beside `dest` and moved into place at the end, so a failure leaves
    nothing behind. Returns the created files, relative to `dest`.

    Raises:
        CliError: `dest` exists and is not empty, or cannot be written.
    """
    from openenv import __version__

    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise CliError(f"{dest} already exists", "pick another name, or remove the folder first", exit_code=2)
    values = {
        "__ENV_NAME__": name,
        "__ENV_CLASS__": class_prefix(name),
        "__ENV_TITLE__": " ".join(p.capitalize() for p in name.split("_") if p),
        "__SDK_REQUIREMENT__": f"openenv-hub[server]=={__version__}",
        "__SDK_VERSION__": __version__,
    }
    source = template_dir()
    parent = dest.parent if str(dest.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=parent))
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)  # mkdtemp makes it private; the env folder is an ordinary one
    except OSError as exc:
        raise CliError(f"cannot create {dest}: {exc.strerror}", "check the folder's permissions") from None
    created: list[str] = []
    try:
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if "__pycache__" in rel.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            target_rel = Path(*(_substitute(part, values) for part in rel.parts))
            target = staging / target_rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.suffix in _TEXT_SUFFIXES or path.name.startswith("."):
                target.write_text(_substitute(path.read_text(encoding="utf-8"), values), encoding="utf-8")
            else:
                shutil.copyfile(path, target)
            created.append(target_rel.as_posix())
        if dest.exists():
            dest.rmdir()
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return created


def _substitute(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def run(args: argparse.Namespace, out: Output) -> int:
    dest = Path(args.name)
    name = dest.name
    check_name(name)
    created = render(dest, name)
    if args.json:
        out.json({"name": name, "path": str(dest.resolve()), "files": created})
        return 0
    out.mark("ok", f"created {dest} ({len(created)} files) from the Space template")
    out.line()
    out.line("Next steps:")
    for cmd, why in (
        (f"openenv validate {dest}", "check it"),
        (f"openenv serve {dest}", "run it on http://127.0.0.1:8000"),
        (f"cd {dest} && pytest", "run its tests"),
        (f"openenv build {dest}", "build its Docker image"),
        (f"openenv push {dest}", "publish it as a Hugging Face Space"),
    ):
        out.line(f"  {cmd:<36} {why}")
    return 0
