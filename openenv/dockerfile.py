"""Reading Dockerfiles: where an env keeps it, its instructions, the images it builds FROM, and
whether it needs BuildKit. Light on purpose (no third-party imports): the validator, the image
builder and the Hub all read Dockerfiles through it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DockerInstruction",
    "ScopedCacheMounts",
    "base_images",
    "dockerfile_instructions",
    "find_dockerfile",
    "needs_buildkit",
    "scope_cache_mounts",
]


@dataclass(frozen=True, slots=True)
class DockerInstruction:
    keyword: str
    args: str
    line: int


def find_dockerfile(root: Path) -> Path | None:
    """The env's Dockerfile: at the root (what a Space needs), else server/Dockerfile (upstream's
    source layout; its build context is still the env folder)."""
    for candidate in (root / "Dockerfile", root / "server" / "Dockerfile"):
        if candidate.is_file():
            return candidate
    return None


def dockerfile_instructions(text: str) -> list[DockerInstruction]:
    """Instructions of a Dockerfile with their first line (continuations joined, comments dropped)."""
    out: list[DockerInstruction] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if not buf:
            start = number
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buf.append(stripped[:-1])
            continue
        buf.append(stripped)
        joined = " ".join(buf)
        buf = []
        keyword, _, args = joined.partition(" ")
        out.append(DockerInstruction(keyword.upper(), args.strip(), start))
    if buf:
        keyword, _, args = " ".join(buf).partition(" ")
        out.append(DockerInstruction(keyword.upper(), args.strip(), start))
    return out


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def base_images(text: str, build_args: dict[str, str] | None = None) -> list[tuple[str, bool]]:
    """The images a Dockerfile builds FROM (not `scratch`, not its own stages), in order, each with
    whether it comes from the `BASE_IMAGE` argument. Global `ARG`s and `build_args` are applied."""
    values: dict[str, str] = {}
    given = dict(build_args or {})
    stages: set[str] = set()
    found: list[tuple[str, bool]] = []
    seen_from = False
    for ins in dockerfile_instructions(text):
        if ins.keyword == "ARG" and not seen_from:
            for item in ins.args.split():
                name, eq, default = item.partition("=")
                values[name] = given[name] if name in given else (default.strip("\"'") if eq else values.get(name, ""))
        elif ins.keyword == "FROM":
            seen_from = True
            parts = [p for p in ins.args.split() if not p.startswith("--")]
            if not parts:
                continue
            ref = parts[0]
            from_base = any(m.group(1) == "BASE_IMAGE" or m.group(3) == "BASE_IMAGE" for m in _VAR.finditer(ref))
            image = _VAR.sub(lambda m: values.get(m.group(1) or m.group(3)) or (m.group(2) or ""), ref)
            if len(parts) >= 3 and parts[1].lower() == "as":
                stages.add(parts[2].lower())
            if image and image.lower() != "scratch" and image.lower() not in stages and (image, from_base) not in found:
                found.append((image, from_base))
    return found


# Syntax only BuildKit understands: mounts and other RUN flags, COPY --link/--chmod, heredocs, a
# `# syntax=` frontend.
_BUILDKIT_ONLY = re.compile(
    r"^\s*(RUN\s+--(mount|network|security)\b|(COPY|ADD)\s+(.*\s)?--(link|chmod|parents|exclude)\b|(RUN|COPY)\s.*<<-?\s*['\"]?[A-Za-z_]+)",
    re.I | re.M,
)


def needs_buildkit(text: str) -> bool:
    """Whether the Dockerfile uses syntax the classic builder rejects."""
    return bool(_BUILDKIT_ONLY.search(text)) or bool(re.match(r"\s*#\s*syntax\s*=", text, re.I))


@dataclass(frozen=True)
class ScopedCacheMounts:
    """A Dockerfile whose RUN cache mounts were given ids of one scope (`scope_cache_mounts`)."""

    text: str
    scoped: list[str]  # the ids the cache mounts now have
    dropped: list[str]  # cache mounts whose options hold a variable: left out (the step runs without them)
    unscoped: list[str]  # cache mounts that could not be reached (where they are): the caller refuses the build


_RUN_FLAGS = re.compile(r"^(\s*RUN)((?:\s+--\S+)+)", re.IGNORECASE)
_RUN_ALONE = re.compile(r"^\s*RUN\s*\\\s*$", re.IGNORECASE)
_MORE_FLAGS = re.compile(r"^(\s*)((?:--\S+\s*)+)")
_CACHE_MOUNT = re.compile(r"\s*--mount=(\S*type=cache\S*)")


def _option(text: str) -> tuple[str, str]:
    key, _, value = text.partition("=")
    return key, value


def scope_cache_mounts(text: str, scope: str) -> ScopedCacheMounts:
    """Give every `RUN --mount=type=cache` an id under `scope`, so that builds of other scopes
    (other envs on the same engine) never share its content: a cache mount is not part of a layer's
    cache key, and one env could otherwise leave files in another's. A mount whose options hold a
    variable is left out (a cache only saves time: the step runs without it); one this cannot reach
    for certain (not among the RUN's leading flags) is reported in `unscoped`."""
    lines = text.splitlines(keepends=True)
    scoped: list[str] = []
    dropped: list[str] = []
    unscoped: list[str] = []
    continued = in_flags = False
    for n, line in enumerate(lines):
        if not continued:  # a new instruction: its RUN flags, on this line and on lines that go on with flags
            match = _RUN_FLAGS.match(line)
            opens = match is not None or _RUN_ALONE.match(line) is not None
        else:
            match = _MORE_FLAGS.match(line) if in_flags else None
            opens = match is not None
        rest = line[match.end() :] if match is not None else line[line.upper().find("RUN") + 3 :]
        next_in_flags = opens and rest.strip() == "\\"

        def rewrite(mount: re.Match[str], n: int = n) -> str:
            spec = mount.group(1)
            if "$" in spec or '"' in spec or "'" in spec:
                dropped.append(f"line {n + 1}: --mount={spec}")
                return ""
            options = dict(_option(o) for o in spec.split(","))
            own = options.get("id") or options.get("target") or options.get("dst") or options.get("destination")
            options["id"] = f"{scope}:{own}"
            scoped.append(options["id"])
            return " --mount=" + ",".join(f"{k}={v}" if v else k for k, v in options.items())

        if match is not None:
            lines[n] = match.group(1) + _CACHE_MOUNT.sub(rewrite, match.group(2)) + line[match.end() :]
        elif _CACHE_MOUNT.search(line) and (continued or line.lstrip().upper().startswith("RUN")):
            unscoped.append(f"line {n + 1}: {line.strip()[:120]}")
        continued, in_flags = line.rstrip("\r\n").endswith("\\"), next_in_flags
    return ScopedCacheMounts("".join(lines), scoped, dropped, unscoped)
