"""One env's entry in the catalog snapshot: a DiscoveryEntry of upstream OpenEnv's Environment
Card profile (`0.1-draft`), made from the env's record and its current passed revision.

hub_service/catalog/snapshot.py writes these into snapshot documents; `ENV_COLUMNS` and
`VERSION_COLUMNS` are all an entry reads, and `CHANGING` what of it may change while the env's
revision stays (the catalog revision covers those, so that it changes whenever an entry would).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from hub_service.catalog.discovery import validation_parts
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.settings import HubSettings
from openenv.validation.rfc008 import check_summary

__all__ = [
    "CHANGING",
    "CONTEXT",
    "ENV_COLUMNS",
    "MAX_TEXT",
    "MEDIA_TYPE",
    "PROFILE",
    "VERSION_COLUMNS",
    "Context",
    "entry",
]

PROFILE = "0.1-draft"
MEDIA_TYPE = "application/vnd.openenv.environment-card+json"
CONTEXT = "https://agenticresourcediscovery.org/context/v1"
NAMESPACE = "openenv"
MAX_TEXT = 8192  # the profile's longest string

# Only what an entry shows (never the README or the validation report, which can be large).
ENV_COLUMNS = (
    EnvRecord.source,
    EnvRecord.owner,
    EnvRecord.name,
    EnvRecord.title,
    EnvRecord.description,
    EnvRecord.tags,
    EnvRecord.deprecated,
    EnvRecord.successor,
)
VERSION_COLUMNS = (
    EnvVersion.sha,
    EnvVersion.manifest,
    EnvVersion.discovery,
    EnvVersion.registry_ref,
    EnvVersion.image_digest,
    EnvVersion.rfc008,
)
# What of those may change while an env's current revision stays the one that passed: the indexer
# refreshes the record's card fields, maintainers deprecate, image collection drops the registry
# reference, a re-run rewrites the version's reports (and its finish time). The rest of a passed
# version (sha, manifest, discovery) is fixed.
CHANGING = (
    EnvRecord.title,
    EnvRecord.description,
    EnvRecord.tags,
    EnvRecord.deprecated,
    EnvRecord.successor,
    EnvVersion.sha,
    EnvVersion.image_digest,
    EnvVersion.registry_ref,
    EnvVersion.finished_at,
)


@dataclass(frozen=True)
class Context:
    """What every entry of one snapshot shares: the settings, its publisher and its source."""

    settings: HubSettings
    publisher: str
    source: dict[str, str]


def _clip(value: Any) -> str | None:
    return value.strip()[:MAX_TEXT] if isinstance(value, str) and value.strip() else None


def entry(context: Context, path: str, env: EnvRecord, version: EnvVersion) -> tuple[dict[str, Any], list[str]]:
    """One DiscoveryEntry (as the profile dumps it, None left out) and the warnings to report."""
    manifest = version.manifest if isinstance(version.manifest, dict) else {}
    found = version.discovery if isinstance(version.discovery, dict) else {}
    revision = context.source["revision"]
    origins = (
        ("discovery.json", found.get("description")),
        ("openenv.yaml", manifest.get("description")),
        ("README.md", env.description),
        ("README.md", env.title),
    )
    origin, description = next(((o, _clip(v)) for o, v in origins if _clip(v)), ("hub", env.repo_id))
    name = _clip(manifest.get("name")) or env.name
    interfaces: list[dict[str, Any]] = [{"protocol": "openenv", "role": "orchestration"}]
    tools = found.get("agent_tools") if isinstance(found.get("agent_tools"), dict) else None
    capabilities: list[str] = []
    if tools:
        interfaces.append(
            {"protocol": tools["protocol"], "role": "agent-tools", "source_revision": revision, "status": "declared"}
        )
        capabilities = list(tools["names"])
    card: dict[str, Any] = {
        "schema_version": PROFILE,
        "name": name,
        "description": description,
        "owner": {"authority": "huggingface.co" if env.source == "hf" else context.publisher, "id": env.owner},
        "source": {**context.source, "path": path},
        # The profile's only artifact kind is a path in its Git source; ours are a Space and an
        # OCI image elsewhere, named in metadata.hub.
        "artifact_availability": "external",
        "artifacts": [],
        "interfaces": interfaces,
        **_license(context.settings, env, version, found),
    }
    spec = manifest.get("spec_version")
    if isinstance(spec, int | str) and not isinstance(spec, bool):
        card["manifest_spec_version"] = spec
    if isinstance(found.get("framework_requirement"), str):
        card["framework_requirement"] = found["framework_requirement"]
    tags = found.get("tags") or [t for t in env.tags or [] if isinstance(t, str)] or manifest.get("tags") or []
    locator = hashlib.sha256(f"{context.source['uri']}\n{path}".encode()).hexdigest()
    made: dict[str, Any] = {
        "@context": CONTEXT,
        "identifier": f"urn:air:{context.publisher}:{NAMESPACE}:{locator}:{revision}",
        "displayName": env.repo_id,
        "type": MEDIA_TYPE,
        "data": card,
        "description": description,
        "tags": sorted({t.strip()[:MAX_TEXT] for t in tags if isinstance(t, str) and t.strip()}),
        "capabilities": capabilities,
        "representativeQueries": list(found.get("representative_queries") or []),
        "metadata": {
            "provenance": {"description": origin, "name": "openenv.yaml" if manifest.get("name") else "hub"},
            "hub": _hub(context.settings, env, version, manifest),
        },
    }
    warnings = [w["message"] for w in found.get("warnings") or [] if isinstance(w, dict) and _clip(w.get("message"))]
    return made, warnings


def _license(settings: HubSettings, env: EnvRecord, version: EnvVersion, found: dict[str, Any]) -> dict[str, str]:
    name, origin = found.get("license"), found.get("license_origin")
    if not isinstance(name, str) or not name:
        return {"license": "unknown"}
    url = _file_url(settings, env, version, origin) if isinstance(origin, str) and name != "unknown" else None
    if name == "other" and url is None:
        return {"license": "unknown"}  # the profile needs a reference for "other"; we have none to give
    return {"license": name, **({"license_url": url} if url else {})}


def _file_url(settings: HubSettings, env: EnvRecord, version: EnvVersion, origin: str) -> str | None:
    """An https link to a file of the Space at the revision (None for local folders or http Hubs)."""
    if env.source != "hf":
        return None
    base = (settings.hf_endpoint or "https://huggingface.co").rstrip("/")
    if not base.startswith("https://"):
        return None
    return f"{base}/spaces/{env.owner}/{env.name}/blob/{version.sha}/{origin}"


def _hub(settings: HubSettings, env: EnvRecord, version: EnvVersion, manifest: dict[str, Any]) -> dict[str, Any]:
    """What the profile has no field for: the env's own id, commit, image and where to resolve it."""
    public = settings.public_url.rstrip("/")
    hub: dict[str, Any] = {
        "id": env.repo_id,
        "source": env.source,
        "revision": version.sha,
        "resolve": f"{public}/api/v1/envs/{env.owner}/{env.name}/resolve?revision={version.sha}",
        "page": f"{public}/api/v1/envs/{env.owner}/{env.name}",
    }
    if version.image_digest:
        hub["image_digest"] = version.image_digest
        if version.registry_ref:
            ref = version.registry_ref.split("@", 1)[0]
            repository = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
            hub["image"] = f"{repository}@{version.image_digest}"
    if env.deprecated:
        hub["deprecated"] = True
        if env.successor:
            hub["successor"] = env.successor
    parts = validation_parts(manifest)
    if parts:
        hub["validation"] = parts
    checks = check_summary(version.rfc008) if version.rfc008 else None
    if checks:  # the RFC 008 report in 60 bytes: `openenv discover --check ID` filters on it
        hub["checks"] = checks
    return hub
