"""`openenv lock`: pin a training run's envs to exact revisions and images in a lock file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from openenv.cli._output import CliError, Output

DESCRIPTION = """Resolve env ids against an OpenEnv Hub service and write a lock file (openenv.lock, JSON):
per env its commit sha, image digest, image reference and protocol version, plus when and against
which Hub it was written. The Hub is told about the lock and keeps its images. Clients built from it
(`EnvClient.from_hub(id, lock="openenv.lock")`, or OPENENV_LOCK=openenv.lock) connect to exactly
that and refuse anything else (LockMismatchError). Commit the file with your training code."""

EXAMPLES = """
openenv lock alice/echo_env bob/chess_env@3f2a9c1 --hub http://127.0.0.1:7860
openenv lock -f envs.txt -o runs/42/openenv.lock          # ids one a line, '#' comments
openenv lock alice/echo_env@sha256:9b1c... --json          # a digest pin: that very image
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("envs", nargs="*", metavar="OWNER/NAME[@REVISION]", help="env ids to lock")
    parser.add_argument(
        "-f", "--file", type=Path, action="append", default=[], help="a file of env ids, one a line ('#' comments)"
    )
    parser.add_argument("-o", "--output", type=Path, default=Path("openenv.lock"), help="default ./openenv.lock")
    parser.add_argument("--hub", default=None, help="the OpenEnv Hub service's URL (default: OPENENV_HUB_URL)")
    parser.add_argument(
        "--no-register", action="store_true", help="do not tell the Hub (it may then collect the locked images)"
    )
    parser.add_argument(
        "--token",
        default=None,
        help="your Hugging Face token, to register the lock (default: HF_TOKEN or the saved login)",
    )
    parser.add_argument("--json", action="store_true", help="print the lock (and its id) as one JSON document")


def run(args: argparse.Namespace, out: Output) -> int:
    from openenv.client import _settings
    from openenv.client._hub_service import HubServiceError, fetch_record, register_lock
    from openenv.client.env_id import EnvId, parse_env_id
    from openenv.client.lock import Lock, LockedEnv
    from openenv.errors import ConfigurationError
    from openenv.protocol import PROTOCOL_VERSION

    hub = (args.hub or "").strip().rstrip("/") or _settings.hub_url()
    if hub is None:
        raise CliError("no OpenEnv Hub service to resolve against", "pass --hub URL or set OPENENV_HUB_URL", 2)
    ids: list[EnvId] = []
    try:
        for text in [*args.envs, *_read_id_files(args.file)]:
            ids.append(parse_env_id(text))
    except ConfigurationError as exc:
        raise CliError(str(exc), exit_code=2) from None
    if not ids:
        raise CliError("no env ids to lock", "name them (OWNER/NAME[@REVISION]) or pass -f FILE", 2)
    seen: dict[str, EnvId] = {}
    for env_id in ids:
        if env_id.repo_id in seen and seen[env_id.repo_id] != env_id:
            raise CliError(
                f"{env_id.repo_id} is named twice ({seen[env_id.repo_id]} and {env_id})",
                "a lock holds one revision per env; keep one",
                2,
            )
        seen[env_id.repo_id] = env_id
    entries: list[LockedEnv] = []
    warnings: list[str] = []
    for env_id in seen.values():
        try:
            record = fetch_record(hub, env_id.repo_id, env_id.revision, token=None)
        except HubServiceError as exc:
            raise CliError(str(exc), "check the id and the Hub's URL; nothing was written") from None
        digest = record.image_digest
        if record.sha is None:
            raise CliError(f"{hub} gives no commit for {env_id}", "it may not be indexed yet; try again later")
        if env_id.digest is not None and digest != env_id.digest:
            raise CliError(f"{hub} resolved {env_id} to an image with digest {digest}", "check the digest")
        if record.yanked:
            warnings.append(f"{env_id.repo_id}@{record.sha[:12]} is yanked: its maintainers advise against it")
        if digest is None:
            warnings.append(f"{env_id.repo_id}@{record.sha[:12]} has no pushed image: only its revision is locked")
        entries.append(LockedEnv(env_id.repo_id, record.sha, digest, record.image, PROTOCOL_VERSION))
    lock = Lock.of(entries, hub)
    registered: dict[str, Any] | None = None
    if not args.no_register:
        token = args.token or _settings.hf_token()
        if not token:
            raise CliError(
                "registering the lock with the Hub needs your Hugging Face token",
                "pass --token or set HF_TOKEN (or --no-register: the Hub may then collect the locked images)",
                2,
            )
        try:
            registered = register_lock(hub, lock.to_dict(), token=token)
        except HubServiceError as exc:
            raise CliError(str(exc), "nothing was written; fix that, or pass --no-register") from None
        if registered.get("id") != lock.id:
            raise CliError(
                f"{hub} registered the lock as {registered.get('id')}, not {lock.id}",
                "the Hub and this openenv disagree on the lock format; upgrade one of them",
            )
    path = lock.save(args.output)
    if out.json_mode:
        out.json(
            {
                "path": str(path),
                "id": lock.id,
                "expires_at": registered.get("expires_at") if registered else None,
                "warnings": warnings,
                "lock": lock.to_dict(),
            }
        )
        return 0
    for entry in entries:
        out.mark("ok", f"{entry.id}@{entry.revision[:12]}", entry.image_digest or "no image digest")
    for warning in warnings:
        out.mark("warn", warning)
    until = f"; the Hub keeps its images until {registered.get('expires_at')}" if registered else ""
    out.line(f"wrote {path} (lock {lock.id[:12]}){until}")
    return 0


def _read_id_files(files: list[Path]) -> list[str]:
    ids: list[str] = []
    for file in files:
        try:
            text = file.read_text()
        except OSError as exc:
            raise CliError(
                f"cannot read {file}: {exc.strerror or exc}", "pass a file of env ids, one a line", 2
            ) from None
        ids.extend(line.split("#", 1)[0].strip() for line in text.splitlines() if line.split("#", 1)[0].strip())
    return ids
