"""The env page's "what it is for" lines: declared tasks, capabilities, task mix, discovery warnings."""

from __future__ import annotations

from html import escape
from typing import Any

from hub_service.catalog.discovery import validation_parts

__all__ = ["discovery_lines"]


def discovery_lines(version: Any | None) -> str:
    """HTML lines from the revision's discovery record and manifest `validation:` parts ("" when none)."""
    if version is None:
        return ""
    found = version.discovery if isinstance(version.discovery, dict) else {}
    parts = validation_parts(version.manifest)
    lines = []
    queries = found.get("representative_queries") or []
    if queries:
        lines.append("Good for: " + " · ".join(f"“{escape(q)}”" for q in queries))
    tools = (found.get("agent_tools") or {}).get("names") or []
    if tools:
        lines.append("Agent tools: " + ", ".join(f"<code>{escape(t)}</code>" for t in tools))
    if parts.get("capabilities"):
        lines.append("Capabilities: " + ", ".join(escape(c) for c in parts["capabilities"]))
    if parts.get("types"):
        kinds = parts["types"]
        shown = kinds.items() if isinstance(kinds, dict) else ((k, "") for k in kinds)
        lines.append("Types: " + ", ".join(escape(f"{k}: {v}" if v else k) for k, v in shown))
    if parts.get("task_distribution"):
        mix = parts["task_distribution"]
        lines.append("Tasks: " + ", ".join(escape(f"{name} ({weight:g})") for name, weight in mix.items()))
    for warning in found.get("warnings") or []:
        if isinstance(warning, dict) and warning.get("message"):
            lines.append(f'<span class="oe-warn">discovery.json: {escape(str(warning["message"]))}</span>')
    return "".join(f'<div class="oe-card-desc oe-discovery">{line}</div>' for line in lines)
