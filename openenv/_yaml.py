"""Loading YAML that strangers wrote (manifests, README front matter): safe and bounded.

`yaml.safe_load` already refuses to build arbitrary Python objects; this adds limits on size,
nesting depth and node count — counting every use of an alias — so a few hundred bytes of
"billion laughs" cannot become gigabytes in whatever later walks the data.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "YamlLimitError", "compose_limited", "load_limited"]

MAX_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_NODES = 20_000


class YamlLimitError(ValueError):
    """The document is too large, too deep, or expands to too many nodes."""


def _check(root: Any, max_depth: int, max_nodes: int) -> None:
    from yaml.nodes import MappingNode, SequenceNode

    seen = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > max_nodes:
            raise YamlLimitError(
                f"the YAML expands to more than {max_nodes} nodes (aliases count each time they are used)"
            )
        if depth > max_depth:
            raise YamlLimitError(f"the YAML nests deeper than {max_depth} levels")
        if isinstance(node, SequenceNode):
            stack.extend((child, depth + 1) for child in node.value)
        elif isinstance(node, MappingNode):
            for key, value in node.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def compose_limited(
    text: str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES
) -> tuple[Any, Any]:
    """Parse `text` into (node, data) with the safe loader, within the limits.

    Raises:
        YamlLimitError: over a limit.
        yaml.YAMLError: not valid YAML.
    """
    import yaml

    if len(text.encode("utf-8", errors="replace")) > max_bytes:
        raise YamlLimitError(f"the YAML is over {max_bytes} bytes")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _check(node, max_depth, max_nodes)
        return node, loader.construct_document(node)
    finally:
        loader.dispose()


def load_limited(text: str, **limits: int) -> Any:
    """`yaml.safe_load(text)` within the limits (see `compose_limited`)."""
    return compose_limited(text, **limits)[1]
