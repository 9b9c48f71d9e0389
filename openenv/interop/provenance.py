"""Where an imported env came from: the one place this is written into, and read from, `openenv.yaml`.

`openenv import` writes one top-level block into the folder's manifest (a manifest keeps any block
it does not define, see `openenv.manifest`):

```
imported_from: {kind: gymnasium, name: CartPole-v1, version: 1.2.0}
```

`kind` is the source's ecosystem (`KINDS`), `name` its id there (a Gymnasium id, a Verifiers
environment's id, an ORS environment's module:Class), `version` the version of the package that
provided it. The Hub reads the block from each revision's stored manifest (`read_provenance`) and
shows it on the env's page and in `GET /api/v1/envs/{owner}/{name}` (`imported_from`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "MANIFEST_KEY", "Provenance", "read_provenance"]

MANIFEST_KEY = "imported_from"
KINDS: dict[str, str] = {"gymnasium": "Gymnasium", "verifiers": "Verifiers", "ors": "ORS"}
_MAX_TEXT = 200


@dataclass(frozen=True, slots=True)
class Provenance:
    """An imported env's source: `kind` (a key of `KINDS`), `name` there, and `version` (None: unknown)."""

    kind: str
    name: str
    version: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown source kind {self.kind!r}: one of {', '.join(KINDS)}")
        if not self.name.strip():
            raise ValueError("an imported env's source needs a name")

    @property
    def label(self) -> str:
        """The ecosystem's own spelling: "Gymnasium", "Verifiers", "ORS"."""
        return KINDS[self.kind]

    def manifest_line(self) -> str:
        """The manifest's `imported_from:` line (YAML flow mapping, values quoted as JSON strings)."""
        fields = {"kind": self.kind, "name": self.name, "version": self.version}
        body = ", ".join(f"{k}: {json.dumps(v)}" for k, v in fields.items() if v is not None)
        return f"{MANIFEST_KEY}: {{{body}}}\n"

    def as_dict(self) -> dict[str, str | None]:
        """`{"kind", "name", "version", "label"}`, the JSON shape the Hub's API gives."""
        return {"kind": self.kind, "name": self.name, "version": self.version, "label": self.label}

    def __str__(self) -> str:
        return f"{self.label} {self.name}" + (f" {self.version}" if self.version else "")


def read_provenance(manifest: Mapping[str, Any] | None) -> Provenance | None:
    """The `imported_from` block of a parsed manifest; None when it has none, or one that does not
    hold a known kind and a name (a manifest is an author's text: it is checked, never trusted)."""
    if not isinstance(manifest, Mapping):
        return None
    block = manifest.get(MANIFEST_KEY)
    if not isinstance(block, Mapping):
        return None
    kind, name, version = block.get("kind"), block.get("name"), block.get("version")
    if not isinstance(kind, str) or kind.lower() not in KINDS or not isinstance(name, str) or not name.strip():
        return None
    if isinstance(version, (int, float)) and not isinstance(version, bool):
        version = str(version)  # `version: 1.2` unquoted
    text = version.strip()[:_MAX_TEXT] if isinstance(version, str) and version.strip() else None
    return Provenance(kind.lower(), name.strip()[:_MAX_TEXT], text)
