"""READMEs as safe HTML: Markdown rendered, then sanitized against an allowlist.

A README is written by whoever published the env, so its HTML is untrusted: after rendering,
`nh3` (the ammonia sanitizer) keeps only harmless tags and attributes, drops every event
handler, `style`, `<script>`, `<iframe>`, `<form>` and `<svg>`, allows links only to http(s),
mailto and in-page anchors, and images only from http(s). Nothing of it can run script.
"""

from __future__ import annotations

import functools
import re
from typing import Any

__all__ = ["render_markdown", "split_front_matter"]

_FRONT = re.compile(r"\A---\s*\n(.*?)\n---\s*(?:\n|\Z)", re.S)
_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "img",
    "kbd",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "span",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
_ATTRS = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title", "width", "height"},
    "td": {"align"},
    "th": {"align"},
    "code": {"class"},
    "ol": {"start"},
}


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """A README's YAML front matter (the Space card: sdk, tags, ...) and the text after it."""
    match = _FRONT.match(text or "")
    if not match:
        return {}, text or ""
    try:
        import yaml

        meta = yaml.safe_load(match.group(1))
    except Exception:  # a broken card is shown as text by the caller; never fail the page
        meta = None
    return (meta if isinstance(meta, dict) else {}), text[match.end() :]


@functools.lru_cache(maxsize=1)
def _renderer() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table").enable("strikethrough")


def render_markdown(text: str, top: int = 1) -> str:
    """Sanitized HTML for Markdown `text` (raw HTML inside it is allowed through the allowlist).

    `top` is the level its first-level headings take (2 inside a page whose <h1> is its own:
    a page has one <h1>); deeper ones follow, down to <h6>."""
    import nh3

    html = _renderer().render(text or "")
    clean = nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRS,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
        # A code block or table wider than the screen scrolls: a keyboard must be able to reach it.
        set_tag_attribute_values={"pre": {"tabindex": "0"}, "table": {"tabindex": "0"}},
    )
    # An image its author gave no text: empty alt text, so that a screen reader skips it rather
    # than read out its file name.
    clean = _NO_ALT.sub('<img alt=""', clean)
    if top > 1:
        clean = _HEADING.sub(lambda m: f"<{m[1]}h{min(6, int(m[2]) + top - 1)}>", clean)
    return clean


_NO_ALT = re.compile(r"<img(?![^>]*\salt=)")
_HEADING = re.compile(r"<(/?)h([1-6])>")  # the sanitizer keeps no attribute on headings
