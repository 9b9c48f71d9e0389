"""What the static checks of one folder share: the folder, its manifest, README, Dockerfile,
declared dependencies, and the app's import probe, each computed once, on demand."""

from __future__ import annotations

import functools
import keyword
import re
import tomllib
from pathlib import Path
from typing import Any

from openenv.manifest import MANIFEST_FILE, Manifest, ManifestInspection, find_app_module, inspect_manifest
from openenv.validation import _files
from openenv.validation._app_import import AppProbe, probe_app
from openenv.validation.registry import Finding, skipped

__all__ = ["FolderContext", "need_front_matter", "need_manifest"]


class FolderContext:
    """What the checks of one folder share; expensive parts are computed once, on demand."""

    def __init__(
        self, root: Path, *, space_id: str | None, import_app: bool, python: str | None, timeout_s: float
    ) -> None:
        self.root = root
        self.space_id = space_id
        self.import_app = import_app
        self.python = python
        self.timeout_s = timeout_s

    @functools.cached_property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_FILE

    @functools.cached_property
    def inspection(self) -> ManifestInspection | None:
        try:
            raw = self.manifest_path.read_bytes()
        except OSError:
            return None
        return inspect_manifest(raw, MANIFEST_FILE)

    @property
    def manifest(self) -> Manifest | None:
        return self.inspection.manifest if self.inspection else None

    @functools.cached_property
    def dockerfile(self) -> Path | None:
        return _files.find_dockerfile(self.root)

    @functools.cached_property
    def front_matter(self) -> _files.FrontMatter | None:
        readme = self.root / "README.md"
        if not readme.is_file():
            return None
        return _files.read_front_matter(readme.read_text(encoding="utf-8", errors="replace"))

    @functools.cached_property
    def _pyproject(self) -> tuple[dict[str, Any] | None, str | None, int | None]:
        path = self.root / "pyproject.toml"
        try:
            return tomllib.loads(path.read_text(encoding="utf-8", errors="replace")), None, None
        except OSError:
            return None, None, None
        except tomllib.TOMLDecodeError as exc:
            line = re.search(r"line (\d+)", str(exc))
            return None, str(exc), int(line.group(1)) if line else None

    @property
    def pyproject(self) -> dict[str, Any] | None:
        """pyproject.toml, parsed; None when it is missing or not valid TOML."""
        return self._pyproject[0]

    @property
    def pyproject_error(self) -> str | None:
        return self._pyproject[1]

    @property
    def pyproject_error_line(self) -> int | None:
        return self._pyproject[2]

    @functools.cached_property
    def declared(self) -> dict[str, str]:
        """Declared distributions (normalized) → the file declaring them."""
        return _files.declared_dependencies(self.root, self.dockerfile)

    @functools.cached_property
    def app_file(self) -> tuple[str, str | None] | None:
        """(module to import, a note) for the manifest's `app`, or None when no file matches."""
        assert self.manifest is not None
        module = find_app_module(self.root, self.manifest.app_module)
        if module is None:
            return None
        return module, (module if module != self.manifest.app_module else None)

    @functools.cached_property
    def mapped_packages(self) -> list[str]:
        """Packages pyproject.toml builds from the folder itself (setuptools `package-dir = {"x" = "."}`,
        hatch `sources = {"" = "x"}`)."""
        tool = (self.pyproject or {}).get("tool")
        tool = tool if isinstance(tool, dict) else {}
        found: list[str] = []
        setuptools = tool.get("setuptools")
        package_dir = setuptools.get("package-dir") if isinstance(setuptools, dict) else None
        if isinstance(package_dir, dict):
            found += [str(k) for k, v in package_dir.items() if str(v).rstrip("/") in (".", "") and k]
        hatch = tool.get("hatch")
        build = hatch.get("build") if isinstance(hatch, dict) else None
        if isinstance(build, dict):
            wheel = (build.get("targets") or {}).get("wheel") if isinstance(build.get("targets"), dict) else None
            for sources in ((wheel or {}).get("sources") if isinstance(wheel, dict) else None, build.get("sources")):
                if isinstance(sources, dict) and str(sources.get("", "")).strip("/"):
                    found.append(str(sources[""]).strip("/"))
        return found

    @functools.cached_property
    def app_prefix(self) -> str | None:
        """What the manifest's `app` puts before the module inside the folder (`chess_env` in
        `chess_env.server.app`), or None."""
        if self.manifest is None or self.app_file is None or self.app_file[1] is None:
            return None
        return self.manifest.app_module.removesuffix("." + self.app_file[0]) or None

    @functools.cached_property
    def package_names(self) -> list[str]:
        """Names the folder goes by as a Python package, most telling first: the manifest's `app`
        prefix when it is one name, the pyproject's mapping, the manifest's name, the folder's name."""
        sure = [p for p in [self.app_prefix] if p and "." not in p]
        sure += self.mapped_packages
        guesses = [self.manifest.name] if self.manifest is not None else []
        guesses.append(self.root.resolve().name)
        # A guess that names a declared dependency (manifest `name: chess`, depending on `chess`)
        # is that dependency's module, not the env's own.
        declared = {_normalized(d) for d in self.declared}
        candidates = sure + [g for g in guesses if _normalized(g) not in declared]
        out: list[str] = []
        for name in candidates:
            if name.isidentifier() and not keyword.iskeyword(name) and name not in out:
                out.append(name)
        return out

    def is_env_module(self, module: str) -> bool:
        """Whether an import of `module` means code of the env itself (its files or its package)."""
        top = module.split(".")[0]
        if top in self.package_names:
            return True
        if _normalized(top) in {_normalized(d) for d in self.declared}:
            return False  # a declared dependency, even if a folder of the env shares its name
        return (
            (self.root / f"{top}.py").is_file()
            or (self.root / top).is_dir()
            or (self.root / "server" / f"{top}.py").is_file()
        )

    @functools.cached_property
    def probe(self) -> AppProbe:
        assert self.manifest is not None and self.app_file is not None
        package = self.package_names[0] if self.package_names else None
        return probe_app(
            self.root,
            self.app_file[0],
            self.manifest.app_attr,
            package=package,
            installed=[p for p in self.mapped_packages if p.isidentifier()],
            python=self.python,
            timeout_s=self.timeout_s,
        )


def _normalized(name: str) -> str:
    """A distribution or module name compared the way PEP 503 names are (case, `_`, `.` and `-` alike)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def need_manifest(ctx: FolderContext) -> Finding | None:
    if ctx.manifest is None:
        return skipped(f"{MANIFEST_FILE} is missing or invalid")
    return None


def need_front_matter(ctx: FolderContext) -> Finding | None:
    fm = ctx.front_matter
    if fm is None or fm.data is None:
        return skipped("README.md has no readable front matter (see readme.front_matter)")
    return None
