"""`openenv init NAME`: render the Space template into a new, working environment folder."""

from __future__ import annotations

import argparse
import keyword
import re
import shutil
import sys
from pathlib import Path

from openenv.cli._output import CliError, Output
from openenv.cli._staging import staged_folder

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

    values = {
        "__ENV_NAME__": name,
        "__ENV_CLASS__": class_prefix(name),
        "__ENV_TITLE__": " ".join(p.capitalize() for p in name.split("_") if p),
        "__SDK_REQUIREMENT__": f"openenv-hub[server]=={__version__}",
        "__SDK_VERSION__": __version__,
    }
    source = template_dir()
    created: list[str] = []
    with staged_folder(dest) as staging:
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
        for plan_rel, text in answer_plans(name).items():
            (staging / plan_rel).parent.mkdir(parents=True, exist_ok=True)
            (staging / plan_rel).write_text(text, encoding="utf-8")
            created.append(plan_rel)
    return created


def answer_plans(name: str, seed: int = 1) -> dict[str, str]:
    """validation/oracle.json and validation/canaries.json of the env `name`, made for it: the
    template's game draws its secret from the env's name and the seed (server/environment.py), so
    the plans are the env's own, and the SDK (which the env's image installs, template and all)
    holds no answer key of any env made from it (RFC 008's runtime.oracle_containment looks for
    the oracle's bytes in the running container)."""
    import json
    import random

    low, high = 1, 100  # the template's LOW and HIGH
    secret = random.Random(f"{name}:{seed}").randint(low, high)
    search, lo, hi = [], low, high  # the oracle: binary search, within the game's 7 guesses
    while True:
        guess = (lo + hi) // 2
        search.append(guess)
        if guess == secret:
            break
        lo, hi = (guess + 1, hi) if secret > guess else (lo, guess - 1)
    away, guess = [], 50 if secret != 50 else 51  # a canary: each guess further from the secret
    for step in (25, 12, 6, 3, 1, 1, 1):
        away.append(guess)
        guess = max(low, guess - step) if guess < secret else min(high, guess + step)

    def plan(episode_id: str, guesses: list[int]) -> dict[str, object]:
        reset = {"episode_id": episode_id, "seed": seed, "options": {}}
        return {"plan_schema_version": "1", "reset": reset, "actions": [{"guess": g} for g in guesses]}

    wrong = low if secret != low else high
    canaries = [plan("canary-same-wrong-guess", [wrong] * 7), plan("canary-guess-away-from-the-hint", away)]
    return {
        "validation/oracle.json": json.dumps(plan("oracle-binary-search", search), indent=2) + "\n",
        "validation/canaries.json": json.dumps({"canaries": canaries}, indent=2) + "\n",
    }


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
