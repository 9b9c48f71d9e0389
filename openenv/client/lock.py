"""Lock files: the exact revisions, images and protocol a training run was set up with.

`openenv lock` writes one (`openenv.lock`, JSON, keys in a fixed order) and registers it with the
Hub, which then keeps every image it names. A client built from it (`from_hub(..., lock=PATH)`,
`EnvPool.from_hub(..., lock=PATH)` or `OPENENV_LOCK=PATH`) connects only to what it names and
raises `LockMismatchError` for anything else::

    {
      "version": 1,                                   # the lock file's schema version
      "created_at": "2026-12-02T08:00:00Z",
      "hub": "http://127.0.0.1:7860",                 # the Hub it was resolved against
      "envs": {
        "alice/echo_env": {
          "revision": "<40-hex commit sha>",
          "image_digest": "sha256:<64 hex>" | null,   # null: the Hub keeps no registry image for it
          "image": "<registry>/alice/echo_env@sha256:..." | null,
          "protocol": 1 | null                        # the wire protocol version; null: its server announces none
        }
      }
    }

The lock's id is the sha256 of its canonical JSON (sorted keys, no spaces): the Hub knows it by it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.client.env_id import EnvId, is_digest, parse_env_id
from openenv.errors import ConfigurationError, LockMismatchError
from openenv.protocol import PROTOCOL_VERSION

__all__ = ["DEFAULT_PATH", "LOCK_VERSION", "Lock", "LockedEnv", "load_lock"]

LOCK_VERSION = 1
DEFAULT_PATH = "openenv.lock"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_RELOCK = "re-run `openenv lock` to lock what you want now"
_TOP_KEYS = ("created_at", "envs", "hub", "version")
_ENV_KEYS = ("image", "image_digest", "protocol", "revision")


@dataclass(frozen=True)
class LockedEnv:
    """One env of a lock: the commit, the image digest and the protocol version it was locked at."""

    id: str
    revision: str
    image_digest: str | None = None
    image: str | None = None
    protocol: int | None = PROTOCOL_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "image": self.image,
            "image_digest": self.image_digest,
            "protocol": self.protocol,
            "revision": self.revision,
        }

    def check_asked(self, env_id: EnvId, lock_name: str) -> None:
        """Raises LockMismatchError when `env_id` pins something other than this entry."""
        asked = env_id.revision
        if asked is None or asked == self.revision or (self.image_digest is not None and asked == self.image_digest):
            return
        if not is_digest(asked) and len(asked) >= 7 and self.revision.startswith(asked.lower()):
            return
        raise LockMismatchError(
            f"{env_id} asks for revision {asked!r}, but {lock_name} locks {self.id} at {self.revision[:12]}"
            f"{' (' + self.image_digest + ')' if self.image_digest else ''}; drop the revision to use the locked one, "
            f"or {_RELOCK}",
            env=self.id,
            expected=self.revision,
            found=asked,
        )

    def check_record(self, sha: str | None, image_digest: str | None, where: str) -> None:
        """Raises LockMismatchError when a resolve record names another commit or image digest."""
        if sha != self.revision:
            raise LockMismatchError(
                f"{where} resolves {self.id} to revision {(sha or 'none')[:12]}, not the locked {self.revision[:12]}; "
                f"{_RELOCK}",
                env=self.id,
                expected=self.revision,
                found=sha,
            )
        if self.image_digest is not None and image_digest != self.image_digest:
            raise LockMismatchError(
                f"{where} gives {self.id}@{self.revision[:12]} the image {image_digest or 'none'}, not the locked "
                f"{self.image_digest}: the image changed since the lock was written; {_RELOCK}",
                env=self.id,
                expected=self.image_digest,
                found=image_digest,
            )

    def check_protocol(self, announced: int | None, url: str) -> None:
        """Raises LockMismatchError when the server speaks another protocol version than the lock's,
        and when it announces none (an upstream server, or one that stopped saying) unless the lock
        says its server had none (`"protocol": null`): a silent server could speak anything."""
        if announced == self.protocol:
            return
        if announced is None:
            raise LockMismatchError(
                f"the server of {self.id} at {url} announces no protocol version, the lock says {self.protocol}; "
                f'{_RELOCK} (a lock whose server announces none says `"protocol": null`)',
                env=self.id,
                expected=str(self.protocol),
                found="none",
            )
        raise LockMismatchError(
            f"the server of {self.id} at {url} speaks protocol version {announced}, the lock says "
            f"{self.protocol if self.protocol is not None else 'none'}; {_RELOCK}",
            env=self.id,
            expected=str(self.protocol) if self.protocol is not None else "none",
            found=str(announced),
        )


@dataclass(frozen=True)
class Lock:
    """A lock file's contents. `load`/`save` read and write it; `entry` finds an env in it."""

    envs: Mapping[str, LockedEnv]
    hub: str | None = None
    created_at: str = field(default_factory=lambda: _now())
    version: int = LOCK_VERSION
    source: str = field(default=DEFAULT_PATH, compare=False)

    @property
    def id(self) -> str:
        """sha256 (hex) of the canonical JSON: how the Hub knows this lock."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {
            "created_at": self.created_at,
            "envs": {name: self.envs[name].to_dict() for name in sorted(self.envs)},
            "hub": self.hub,
            "version": self.version,
        }

    def dumps(self) -> str:
        """The file's text: indented JSON, keys sorted, a final newline (stable under re-saving)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def save(self, path: str | Path = DEFAULT_PATH) -> Path:
        target = Path(path)
        target.write_text(self.dumps())
        return target

    @classmethod
    def load(cls, path: str | Path = DEFAULT_PATH) -> Lock:
        """Read a lock file.

        Raises:
            ConfigurationError: missing, not JSON, or not a lock file of a version this SDK reads.
        """
        source = Path(path)
        try:
            data = json.loads(source.read_text())
        except FileNotFoundError:
            raise ConfigurationError(
                f"no lock file {source}; write one with `openenv lock OWNER/NAME ... --hub URL`"
            ) from None
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"{source} is not a readable JSON lock file ({exc}); {_RELOCK}") from None
        return cls.from_dict(data, source=str(source))

    @classmethod
    def from_dict(cls, data: Any, source: str = DEFAULT_PATH) -> Lock:
        """A lock from its JSON document (the file's, or one posted to the Hub).

        Raises:
            ConfigurationError: the document is not a lock of this schema; the message says what is wrong.
        """

        def bad(what: str) -> ConfigurationError:
            return ConfigurationError(f"{source} is not a valid lock file: {what}; {_RELOCK}")

        if not isinstance(data, dict):
            raise bad("it is not a JSON object")
        version = data.get("version")
        if isinstance(version, int) and not isinstance(version, bool) and version > LOCK_VERSION:
            raise ConfigurationError(
                f"{source} is a version {version} lock file; this openenv reads version {LOCK_VERSION}: upgrade openenv-hub"
            )
        if version != LOCK_VERSION:
            raise bad(f"'version' is {version!r}, not {LOCK_VERSION}")
        if unknown := sorted(set(data) - set(_TOP_KEYS)):
            raise bad(f"unknown keys {unknown}")
        created, hub, envs = data.get("created_at"), data.get("hub"), data.get("envs")
        if not isinstance(created, str) or not created:
            raise bad("'created_at' is not a timestamp")
        if hub is not None and not isinstance(hub, str):
            raise bad("'hub' is not a URL")
        if not isinstance(envs, dict) or not envs:
            raise bad("'envs' is not an object of at least one env")
        return cls({name: _entry(name, value, bad) for name, value in envs.items()}, hub, created, LOCK_VERSION, source)

    @classmethod
    def of(cls, entries: list[LockedEnv], hub: str | None) -> Lock:
        """A new lock (created now) of `entries`."""
        return cls({e.id: e for e in entries}, hub)

    def entry(self, env_id: EnvId) -> LockedEnv:
        """The locked entry for `env_id`.

        Raises:
            LockMismatchError: the env is not in the lock, or `env_id` pins another revision or digest.
        """
        locked = self.envs.get(env_id.repo_id)
        if locked is None:
            listed = ", ".join(sorted(self.envs))
            raise LockMismatchError(
                f"{env_id.repo_id} is not in {self.source} (it locks {listed}); add it to the ids you lock and re-run "
                "`openenv lock`",
                env=env_id.repo_id,
                expected=None,
                found=env_id.repo_id,
            )
        locked.check_asked(env_id, self.source)
        return locked


def load_lock(lock: str | Path | Lock | None) -> Lock | None:
    """`lock` as a Lock: a path is read, None means `OPENENV_LOCK` (or no lock when it is unset)."""
    if isinstance(lock, Lock):
        return lock
    if lock is None:
        from openenv.client import _settings

        lock = _settings.lock_path()
        if lock is None:
            return None
    return Lock.load(lock)


def _entry(name: Any, value: Any, bad: Any) -> LockedEnv:
    try:
        env_id = parse_env_id(name) if isinstance(name, str) else None
    except ConfigurationError:
        env_id = None
    if env_id is None or env_id.revision is not None:
        raise bad(f"{name!r} is not an env id owner/name")
    if not isinstance(value, dict):
        raise bad(f"the entry of {name} is not an object")
    if unknown := sorted(set(value) - set(_ENV_KEYS)):
        raise bad(f"the entry of {name} has unknown keys {unknown}")
    if "protocol" not in value:
        raise bad(f"the entry of {name} has no protocol (a version number, or null: its server announces none)")
    revision, digest, image, protocol = (value.get(k) for k in ("revision", "image_digest", "image", "protocol"))
    if not isinstance(revision, str) or not _SHA.match(revision):
        raise bad(f"the revision of {name} is not a 40-hex commit sha")
    if digest is not None and not (isinstance(digest, str) and is_digest(digest)):
        raise bad(f"the image_digest of {name} is not 'sha256:' and 64 hex digits")
    if image is not None and not isinstance(image, str):
        raise bad(f"the image of {name} is not a reference")
    if protocol is not None and (not isinstance(protocol, int) or isinstance(protocol, bool) or protocol < 1):
        raise bad(f"the protocol of {name} is not a version number (or null: its server announces none)")
    return LockedEnv(env_id.repo_id, revision, digest, image, protocol)


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
