"""`openenv import SOURCE [--type verifiers|ors|gymnasium] [--env-class NAME] [-o DIR]`: an environment of
another ecosystem as an OpenEnv env folder.

A SOURCE that is a folder or a .py file is read (never imported or run) for Verifiers and ORS
environments (`openenv.cli._detect`); any other SOURCE is a Gymnasium id. Bad input of every kind
exits 2 with what was found, and writes nothing: the folder is built beside DIR and moved into
place only when complete.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING

from openenv.cli._output import CliError, Output

if TYPE_CHECKING:
    from openenv.cli._detect import Candidate

DESCRIPTION = """Import an environment of another ecosystem as an OpenEnv env folder (models, server, client,
Dockerfile, README saying where it came from, openenv.yaml) that `openenv validate` passes.

SOURCE is a registered Gymnasium id (CartPole-v1, FrozenLake-v1, ALE/Pong-v5 with ale-py, or
module:Id for a package that registers ids), or a folder / .py file holding a Verifiers environment
(a module importing `verifiers` that defines load_environment) or an ORS environment (a class
deriving from ORS's Environment). Sources are read, never run, to find their environments; several
found need --env-class, several formats --type. The source is copied into the folder's source/;
its server needs `verifiers` or `openreward` (server/requirements.txt says which).

Exit codes: 0 written, 2 bad input (nothing written)."""

EXAMPLES = """
openenv import CartPole-v1 -o cartpole_env
openenv import ALE/Pong-v5 -o pong_env
openenv import ./my_vf_env -o my_vf_env     # a Verifiers environment (load_environment)
openenv import ./guess.py --type ors          # an ORS environment class
"""

TYPES = ("verifiers", "ors", "gymnasium")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="a Gymnasium id, or a folder / .py file of a Verifiers or ORS environment")
    parser.add_argument("--type", choices=TYPES, dest="source_type", help="the source's format (default: detected)")
    parser.add_argument("--env-class", help="which environment, when the source holds several (Name or module:Name)")
    parser.add_argument(
        "-o", "--output", metavar="DIR", help="the env folder to write (default: ./<id>_env); its name is the env's"
    )
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")


def default_folder(source: str) -> str:
    """`CartPole-v1` → `cartpole_v1_env`, `ALE/Pong-v5` → `pong_v5_env`."""
    base = re.sub(r"[^a-z0-9]+", "_", source.rpartition(":")[2].rpartition("/")[2].lower()).strip("_")
    base = f"env_{base}" if base[:1].isdigit() else base or "imported"
    return base if base.endswith("_env") else f"{base}_env"


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.cli.init import check_name

    path = Path(args.source)
    kind = args.source_type or ("gymnasium" if not path.exists() else None)
    default = default_folder(path.resolve().stem if kind != "gymnasium" and path.exists() else args.source)
    dest = Path(args.output or default)
    name = dest.name
    check_name(name)
    if kind != "gymnasium":
        return _import_source(path, kind, args.env_class, dest, args.json, out)
    from openenv.cli._gym_source import inspect_id
    from openenv.cli._staging import check_free, staged_folder

    check_free(dest)
    if args.env_class:
        raise CliError("--env-class picks among a folder's environments; a Gymnasium id names one", None, 2)
    with out.status(f"making {args.source} to read its spaces"):
        source = inspect_id(args.source)  # says so (exit 2) when gymnasium is not installed
    from openenv.cli._gym_files import write_folder  # these import gymnasium
    from openenv.cli._gym_models import space_text

    with staged_folder(dest) as staging:
        files = write_folder(staging, name, source)
    if args.json:
        out.json(
            {
                "name": name,
                "path": str(dest.resolve()),
                "type": "gymnasium",
                "source": source.env_id,
                "gymnasium": source.version,
                "requirements": source.requirements,
                "render": source.render,
                "files": files,
            }
        )
        return 0
    out.mark("ok", f"imported {source.env_id} (Gymnasium {source.version}) into {dest} ({len(files)} files)")
    out.line(f"  action       {space_text(source.action_space)}")
    out.line(f"  observation  {space_text(source.observation_space)}")
    out.line(f"  picture      {'rgb_array, as PNG' if source.render else 'none'}")
    out.line(f"  requires     {', '.join(source.requirements)}")
    out.line()
    out.line("Next steps:")
    for cmd, why in (
        (f"openenv validate {dest}", "check it"),
        (f"openenv serve {dest}", "run it on http://127.0.0.1:8000"),
        (f"openenv build {dest}", "build its Docker image"),
    ):
        out.line(f"  {cmd:<36} {why}")
    return 0


def _import_source(path: Path, kind: str | None, env_class: str | None, dest: Path, as_json: bool, out: Output) -> int:
    """Write the env folder for the one Verifiers / ORS environment of a folder or .py file."""
    from openenv.cli._interop_files import requirements, source_info, write_folder
    from openenv.cli._staging import check_free, staged_folder

    found = _find_source(path, kind, env_class)
    check_free(dest)
    info = source_info(path)
    label = {"verifiers": "Verifiers", "ors": "ORS"}[found.kind]
    with staged_folder(dest) as staging:
        files = write_folder(staging, dest.name, path, found, info)
    reqs = requirements(found.kind, info)
    if as_json:
        out.json(
            {
                "name": dest.name,
                "path": str(dest.resolve()),
                "type": found.kind,
                "source": found.qualified_name,
                "project": info.project,
                "version": info.version,
                "requirements": reqs,
                "files": files,
            }
        )
        return 0
    version = f" {info.version}" if info.version else ""
    out.mark("ok", f"imported the {label} environment {found.qualified_name}{version} into {dest} ({len(files)} files)")
    out.line(f"  source       {path} (copied into {dest}/source)")
    out.line(f"  requires     {', '.join(reqs)}")
    out.line()
    out.line("Next steps:")
    for cmd, why in (
        (f"openenv validate {dest}", "check it"),
        (f"openenv serve {dest}", "run it on http://127.0.0.1:8000 (with its requirements installed)"),
        (f"openenv build {dest}", "build its Docker image"),
    ):
        out.line(f"  {cmd:<36} {why}")
    return 0


def _find_source(path: Path, kind: str | None, env_class: str | None) -> Candidate:
    """The one Verifiers / ORS environment of a folder or .py file, found by reading it.

    Raises:
        CliError: exit 2: no such path, nothing found, several formats (--type), several
            environments (--env-class).
    """
    from openenv.cli._detect import scan

    if not path.exists():
        raise CliError(f"{path} does not exist", f"a {kind} source is a folder or a .py file", 2)
    if path.is_file() and path.suffix != ".py":
        raise CliError(f"{path} is neither a folder nor a .py file", None, 2)
    found = scan(path)
    candidates = [c for c in found.candidates if kind is None or c.kind == kind]
    what = "Verifiers or ORS" if kind is None else {"verifiers": "Verifiers", "ors": "ORS"}[kind]
    if not candidates:
        others = sorted({c.kind for c in found.candidates})
        seen = f"; it holds {' and '.join(others)} environments (pass that --type)" if others else ""
        broken = (
            f"; {len(found.unreadable)} did not parse ({', '.join(found.unreadable[:3])})" if found.unreadable else ""
        )
        raise CliError(
            f"no {what} environment in {path} ({found.files_read} Python files read{broken}){seen}",
            "a Verifiers env is a module that imports verifiers and defines load_environment(); an ORS env is a "
            "class deriving from ORS's Environment; for a Gymnasium id, pass --type gymnasium",
            2,
        )
    if env_class:
        chosen = [c for c in candidates if env_class in (c.name, c.qualified_name)]
        if not chosen:
            names = ", ".join(c.qualified_name for c in candidates)
            raise CliError(f"--env-class {env_class} matches none of the environments found: {names}", None, 2)
        candidates = chosen
    kinds = sorted({c.kind for c in candidates})
    if len(kinds) > 1:
        listed = "; ".join(f"{k}: {', '.join(c.qualified_name for c in candidates if c.kind == k)}" for k in kinds)
        raise CliError(f"{path} holds environments of several formats ({listed})", f"pass --type {'|'.join(kinds)}", 2)
    if len(candidates) > 1:
        names = ", ".join(c.qualified_name for c in candidates)
        raise CliError(
            f"{path} holds {len(candidates)} {what} environments: {names}", "pass --env-class with one of them", 2
        )
    return candidates[0]
