"""What an env's image installs, read from its Dockerfile and the files it names, never run.

`pip install` lines (with `ARG`/`ENV` defaults put in), the requirement files they pass with
`-r`, and the package's own dependencies when the Dockerfile installs the folder (`pip install .`)
without a lock file. Each requirement says where it was written and whether it names one exact
version, which is what `static.dependency_pinning` asks and what `static.sbom` can list.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from openenv.dockerfile import dockerfile_instructions

__all__ = ["Installed", "installed_requirements"]


@dataclass(frozen=True, slots=True)
class Installed:
    spec: str
    where: str  # "server/requirements.txt:2", "Dockerfile:10"
    name: str | None  # the distribution, when the spec names one
    version: str | None  # the one exact version it pins, when it does
    local: bool = False  # a path in the build context (a wheel, a folder): its bytes are the pin

    @property
    def pinned(self) -> bool:
        return self.local or self.version is not None


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")
# pip options followed by a value that is not a requirement
_WITH_VALUE = frozenset(
    {
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-c",
        "--constraint",
        "--target",
        "-t",
        "--prefix",
        "--root",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--trusted-host",
        "--progress-bar",
        "--cache-dir",
        "--src",
        "--upgrade-strategy",
        "--only-binary",
        "--no-binary",
    }
)


def _read(spec: str, where: str, root: Path) -> Installed:
    if spec.startswith((".", "/")) or spec.endswith((".whl", ".tar.gz", ".zip")):
        return Installed(spec, where, None, None, local=True)
    try:
        req = Requirement(spec)
    except InvalidRequirement:
        return Installed(spec, where, None, None)
    if req.url:
        return Installed(spec, where, req.name, None, local="sha256=" in req.url)
    exact = [s.version for s in req.specifier if s.operator in ("==", "===") and "*" not in s.version]
    return Installed(spec, where, req.name, exact[0] if len(exact) == 1 else None)


def _requirements_file(root: Path, rel: str, seen: set[str]) -> list[Installed]:
    path = (root / rel).resolve()
    if rel in seen or not path.is_relative_to(root.resolve()) or not path.is_file():
        return []
    seen.add(rel)
    out: list[Installed] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = raw.split(" #")[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ")):
            out += _requirements_file(root, str(Path(rel).parent / line.split(None, 1)[1]), seen)
        elif not line.startswith("-"):
            out.append(_read(line, f"{rel}:{number}", root))
    return out


def _project_dependencies(root: Path) -> list[Installed]:
    if (root / "uv.lock").is_file():
        return []  # the lock pins them
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return []
    deps = project.get("dependencies") if isinstance(project, dict) else None
    return [_read(str(d), "pyproject.toml", root) for d in deps or [] if isinstance(d, str)]


def installed_requirements(root: Path, dockerfile: Path) -> list[Installed]:
    """Every requirement the Dockerfile's `pip install` lines name, directly or through files."""
    values: dict[str, str] = {}
    out: list[Installed] = []
    seen: set[str] = set()
    name = dockerfile.relative_to(root).as_posix()
    for ins in dockerfile_instructions(dockerfile.read_text(encoding="utf-8", errors="replace")):
        if ins.keyword in ("ARG", "ENV"):
            for item in shlex.split(ins.args, posix=True) if ins.args.count('"') % 2 == 0 else ins.args.split():
                key, eq, default = item.partition("=")
                if eq:
                    values[key] = default
            continue
        if ins.keyword != "RUN":
            continue
        text = _VAR.sub(lambda m: values.get(m.group(1) or m.group(3)) or (m.group(2) or ""), ins.args)
        for command in re.split(r"&&|;|\|\|", text):
            try:
                words = shlex.split(command)
            except ValueError:
                words = command.split()
            if "install" not in words or not any(w == "pip" or w.endswith("/pip") or w == "pip3" for w in words):
                continue
            args = words[words.index("install") + 1 :]
            i = 0
            while i < len(args):
                word = args[i]
                if word in ("-r", "--requirement") and i + 1 < len(args):
                    out += _requirements_file(root, args[i + 1], seen)
                    i += 2
                    continue
                if word in ("-e", "--editable") and i + 1 < len(args):
                    word, i = args[i + 1], i + 1
                elif word in _WITH_VALUE:
                    i += 2
                    continue
                elif word.startswith("-"):
                    i += 1
                    continue
                if word.startswith((".", "/")) and not word.endswith((".whl", ".tar.gz", ".zip")):
                    out += _project_dependencies(root)  # a folder: the package copied into the image
                out.append(_read(word, f"{name}:{ins.line}", root))
                i += 1
    return out
