"""Publish an env folder as a Hugging Face Docker Space."""

from __future__ import annotations

import fnmatch
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.manifest import Manifest, load_manifest
from openenv.spaces._hf import hf_api, hub_error, space_urls, whoami

__all__ = ["DEFAULT_EXCLUDES", "PushResult", "push_space", "space_readme", "stage_folder"]

DEFAULT_EXCLUDES = (
    ".git",
    ".venv",
    "venv",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "*.egg-info",
    ".env",
    ".DS_Store",
    ".openenv-sdk",
    "node_modules",
)


@dataclass
class PushResult:
    """What `push_space` did.

    Attributes:
        repo_id: the Space, "owner/name".
        url: its page on the Hub.
        app_url: where its app answers (from the Hub's runtime domains / subdomain).
        commit: the commit id of the upload.
        pr_url: the pull request's URL when `create_pr` was asked.
        files: the files uploaded.
        variables: the Space variables set; secrets: the names of the secrets set.
        notes: things the user should know (secrets the manifest asks for and were not given...).
    """

    repo_id: str
    url: str
    app_url: str
    commit: str | None
    pr_url: str | None
    files: list[str]
    variables: dict[str, str] = field(default_factory=dict)
    secrets: list[str] = field(default_factory=list)
    stage: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _excluded(rel: str, patterns: Iterable[str]) -> bool:
    parts = rel.split("/")
    return any(fnmatch.fnmatch(rel, p) or any(fnmatch.fnmatch(part, p) for part in parts) for p in patterns)


def space_readme(readme: str | None, manifest: Manifest) -> str:
    """README.md with the front matter a Docker Space of this env needs.

    Keeps the author's keys and body; sets `sdk: docker` and `app_port`, and puts `openenv` (and the
    manifest's tags) into `tags`. Makes a README from the manifest when there is none.
    """
    import yaml

    front: dict[str, Any] = {}
    body = ""
    if readme is not None:
        lines = readme.splitlines(keepends=True)
        end = (
            next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
            if lines and lines[0].strip() == "---"
            else None
        )
        if end is not None:
            loaded = yaml.safe_load("".join(lines[1:end])) or {}
            front = loaded if isinstance(loaded, dict) else {}
            body = "".join(lines[end + 1 :])
        else:
            body = readme
    else:
        body = f"\n# {manifest.name}\n\n{manifest.description or 'An OpenEnv environment.'}\n"
    front.setdefault("title", manifest.name.replace("_", " ").title())
    front["sdk"] = "docker"
    front["app_port"] = manifest.port
    tags = [t for t in front.get("tags") or [] if isinstance(t, str)]
    for tag in ["openenv", *manifest.tags]:
        if tag not in tags:
            tags.append(tag)
    front["tags"] = tags
    return (
        "---\n"
        + yaml.safe_dump(front, sort_keys=False, allow_unicode=True)
        + "---\n"
        + (body if body.startswith("\n") else "\n" + body)
    )


def stage_folder(root: Path, manifest: Manifest, dest: Path, excludes: Iterable[str] = ()) -> list[str]:
    """Copy what the Space gets into `dest`: the folder minus excludes, with a Space README and a
    root Dockerfile (upstream's server/Dockerfile is copied up). Returns the files, relative."""
    patterns = (*DEFAULT_EXCLUDES, *excludes)
    files: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or path.is_symlink() or _excluded(rel, patterns):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        files.append(rel)
    readme = root / "README.md"
    (dest / "README.md").write_text(
        space_readme(readme.read_text(encoding="utf-8") if readme.is_file() else None, manifest), encoding="utf-8"
    )
    if "README.md" not in files:
        files.append("README.md")
    if not (dest / "Dockerfile").is_file() and (dest / "server" / "Dockerfile").is_file():
        shutil.copy2(dest / "server" / "Dockerfile", dest / "Dockerfile")
        files.append("Dockerfile")
    return sorted(files)


def push_space(
    path: str | Path,
    *,
    repo_id: str | None = None,
    private: bool | None = None,
    create_pr: bool = False,
    excludes: Iterable[str] = (),
    variables: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    commit_message: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
) -> PushResult:
    """Create (or update) a Docker Space from an env folder and upload it.

    Args:
        repo_id: "owner/name" or "name" (then under your user); default: your user / the manifest's name.
        private: make a new Space private (an existing one keeps its visibility).
        create_pr: upload as a pull request instead of to main (variables and secrets are then not set).
        excludes: extra glob patterns to leave out (added to `DEFAULT_EXCLUDES`).
        variables: Space variables; the manifest's `variables` are set too (these win).
        secrets: Space secrets (values are sent to the Hub, never written anywhere else).
        endpoint, token: default to HF_ENDPOINT / HF_TOKEN.

    Raises:
        ManifestError: the folder's manifest is missing or invalid.
        HubRequestError: not logged in, no write access, or the Hub refused (message has advice).
    """
    root = Path(path)
    manifest = load_manifest(root)
    api = hf_api(endpoint, token)
    if repo_id is None or "/" not in repo_id:
        repo_id = f"{whoami(api)}/{repo_id or manifest.name}"
    try:
        api.create_repo(repo_id, repo_type="space", space_sdk="docker", private=private, exist_ok=True)
    except Exception as exc:
        raise hub_error(exc, f"creating the Space {repo_id}", repo_id) from exc
    with tempfile.TemporaryDirectory(prefix="openenv-push-") as tmp:
        staged = Path(tmp)
        files = stage_folder(root, manifest, staged, excludes)
        message = commit_message or f"Upload {manifest.name} with openenv push"
        try:
            info = api.upload_folder(
                repo_id=repo_id, repo_type="space", folder_path=str(staged), commit_message=message, create_pr=create_pr
            )
        except Exception as exc:
            raise hub_error(exc, f"uploading to {repo_id}", repo_id) from exc
    result_vars = {**manifest.variables, **(variables or {})}
    notes: list[str] = []
    secret_names: list[str] = []
    if create_pr:
        if result_vars or secrets:
            notes.append(
                "variables and secrets are not set for a pull request; set them after merging (push without --create-pr)"
            )
        result_vars = {}
    else:
        try:
            for key, value in result_vars.items():
                api.add_space_variable(repo_id, key, value)
            for key, value in (secrets or {}).items():
                api.add_space_secret(repo_id, key, value)
                secret_names.append(key)
        except Exception as exc:
            raise hub_error(exc, f"setting variables/secrets of {repo_id}", repo_id) from exc
    missing = [s for s in manifest.secrets if s not in (secrets or {})]
    if missing and not create_pr:
        notes.append(
            f"the manifest lists secrets not given here: {', '.join(missing)} "
            "(set them with --secret NAME=VALUE, or in the Space's settings, unless they are set already)"
        )
    urls = space_urls(api, repo_id)
    pr_url = getattr(info, "pr_url", None)
    if create_pr and pr_url is None:
        notes.append("nothing changed since the last upload, so no pull request was opened")
    return PushResult(
        repo_id=repo_id,
        url=urls.page,
        app_url=urls.app,
        commit=getattr(info, "oid", None),
        pr_url=pr_url,
        files=files,
        variables=result_vars,
        secrets=secret_names,
        stage=urls.stage,
        notes=notes,
    )
