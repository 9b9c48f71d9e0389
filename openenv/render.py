"""Pictures of an episode and the buttons to play it: frames, sanitizing, and action choices.

`Environment.render()` returns what `as_frame` accepts: a `Frame`, a string (ANSI or plain
text), a ``(media_type, data)`` pair, or an RGB/grayscale numpy array (encoded as PNG). Frames
travel over the wire as `Frame.to_wire()` (the "render" protocol extension) and come back with
`Frame.from_wire`.

A frame is written by whoever wrote the env, so a page shows it only through `frame_html`:
images and SVG as ``<img>`` data URLs (nothing inside an image can run script or fetch),
SVG and HTML passed first through an allow-list (`sanitize_frame`), text escaped with ANSI
colours turned into ``oe-*`` classes (style them with `ANSI_CSS`).

`action_choices` turns an action schema (and the observation's list of legal actions) into one
button per action when the action space is finite.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANSI_CSS",
    "MAX_FRAME_BYTES",
    "MEDIA_TYPES",
    "Choice",
    "Frame",
    "action_choices",
    "as_frame",
    "frame_html",
    "sanitize_frame",
]

MAX_FRAME_BYTES = 4 * 1024 * 1024
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg"})
_TEXT_TYPES = frozenset({"image/svg+xml", "text/html", "text/x-ansi", "text/plain"})
MEDIA_TYPES: frozenset[str] = _IMAGE_TYPES | _TEXT_TYPES


@dataclass(frozen=True)
class Frame:
    """One picture of the environment: its media type and raw bytes (text types are UTF-8)."""

    media_type: str
    data: bytes

    def text(self) -> str:
        """The frame as text (SVG, HTML, ANSI and plain text only).

        Raises:
            ValueError: the frame is an image (PNG/JPEG) or not valid UTF-8.
        """
        if self.media_type not in _TEXT_TYPES:
            raise ValueError(f"a {self.media_type} frame is binary, not text")
        try:
            return self.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"the {self.media_type} frame is not valid UTF-8: {exc}") from None

    def to_wire(self) -> dict[str, Any]:
        """JSON-safe form: ``{"media_type", "encoding": "base64" | "utf-8", "data": str}``."""
        if self.media_type in _TEXT_TYPES:
            return {"media_type": self.media_type, "encoding": "utf-8", "data": self.text()}
        return {
            "media_type": self.media_type,
            "encoding": "base64",
            "data": base64.b64encode(self.data).decode("ascii"),
        }

    @classmethod
    def from_wire(cls, d: Any) -> Frame:
        """The frame `to_wire` wrote.

        Raises:
            ValueError: `d` is not such an object (says which part is wrong).
        """
        if not isinstance(d, dict):
            raise ValueError(f"a frame must be an object with media_type, encoding and data, not {type(d).__name__}")
        media_type, encoding, data = d.get("media_type"), d.get("encoding"), d.get("data")
        if media_type not in MEDIA_TYPES:
            raise ValueError(f"unknown frame media_type {media_type!r}; expected one of {sorted(MEDIA_TYPES)}")
        if not isinstance(data, str):
            raise ValueError("a frame's data must be a string")
        if encoding == "utf-8":
            return cls(media_type, data.encode("utf-8"))
        if encoding == "base64":
            try:
                return cls(media_type, base64.b64decode(data, validate=True))
            except (binascii.Error, ValueError):
                raise ValueError("a frame's base64 data does not decode") from None
        raise ValueError(f"unknown frame encoding {encoding!r}; expected 'base64' or 'utf-8'")


def as_frame(value: Any) -> Frame | None:
    """What `Environment.render()` returned, as a Frame (None: no frame).

    Accepts a Frame, None, a str (ANSI text when it holds escape codes, else plain text), a
    ``(media_type, bytes | str)`` pair, PNG/JPEG bytes, or a numpy uint8 array of shape
    (h, w), (h, w, 3) or (h, w, 4) (encoded as PNG).

    Raises:
        ValueError: anything else, or an unknown media type.
    """
    if value is None or isinstance(value, Frame):
        return value
    if isinstance(value, str):
        return Frame("text/x-ansi" if "\x1b[" in value else "text/plain", value.encode("utf-8"))
    if isinstance(value, (bytes, bytearray)):
        if value.startswith(b"\x89PNG\r\n\x1a\n"):
            return Frame("image/png", bytes(value))
        if value.startswith(b"\xff\xd8\xff"):
            return Frame("image/jpeg", bytes(value))
        raise ValueError("render() returned bytes that are neither PNG nor JPEG; return (media_type, bytes)")
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str):
        media_type, data = value
        if media_type not in MEDIA_TYPES:
            raise ValueError(f"unknown frame media_type {media_type!r}; expected one of {sorted(MEDIA_TYPES)}")
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):
            raise ValueError(f"a frame's data must be bytes or str, not {type(data).__name__}")
        return Frame(media_type, bytes(data))
    if hasattr(value, "shape") and hasattr(value, "tobytes"):
        return Frame("image/png", _png(value))
    raise ValueError(
        f"render() returned a {type(value).__name__}; return a Frame, a str, (media_type, data), "
        "image bytes, a numpy image array or None"
    )


def _png(array: Any) -> bytes:
    shape = tuple(int(n) for n in array.shape)
    if (
        str(getattr(array, "dtype", "")) != "uint8"
        or len(shape) not in (2, 3)
        or (len(shape) == 3 and shape[2] not in (1, 3, 4))
    ):
        raise ValueError(f"an image array must be uint8 of shape (h, w), (h, w, 3) or (h, w, 4), not {shape}")
    height, width = shape[0], shape[1]
    channels = shape[2] if len(shape) == 3 else 1
    color = {1: 0, 3: 2, 4: 6}[channels]
    raw = bytes(array.tobytes(order="C"))
    stride = width * channels
    rows = b"".join(b"\x00" + raw[r * stride : (r + 1) * stride] for r in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, color, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b"")


# -- sanitizing ------------------------------------------------------------------------------------

_SVG_TAGS = {
    "svg",
    "g",
    "defs",
    "symbol",
    "use",
    "title",
    "desc",
    "rect",
    "circle",
    "ellipse",
    "line",
    "polyline",
    "polygon",
    "path",
    "text",
    "tspan",
    "linearGradient",
    "radialGradient",
    "stop",
    "clipPath",
    "mask",
    "pattern",
    "marker",
}
_SVG_ATTRS = {
    "id",
    "class",
    "x",
    "y",
    "x1",
    "y1",
    "x2",
    "y2",
    "cx",
    "cy",
    "r",
    "rx",
    "ry",
    "dx",
    "dy",
    "d",
    "points",
    "width",
    "height",
    "viewBox",
    "preserveAspectRatio",
    "transform",
    "fill",
    "fill-opacity",
    "fill-rule",
    "stroke",
    "stroke-width",
    "stroke-linecap",
    "stroke-linejoin",
    "stroke-dasharray",
    "stroke-opacity",
    "opacity",
    "font-family",
    "font-size",
    "font-weight",
    "font-style",
    "text-anchor",
    "dominant-baseline",
    "letter-spacing",
    "offset",
    "stop-color",
    "stop-opacity",
    "gradientUnits",
    "gradientTransform",
    "clip-path",
    "clip-rule",
    "mask",
    "patternUnits",
    "markerWidth",
    "markerHeight",
    "refX",
    "refY",
    "orient",
    "href",
    "xlink:href",
    "style",
    "visibility",
    "display",
    "role",
    "aria-label",
}
_HTML_TAGS = {
    "div",
    "span",
    "p",
    "br",
    "b",
    "strong",
    "i",
    "em",
    "u",
    "s",
    "small",
    "sub",
    "sup",
    "code",
    "pre",
    "kbd",
    "table",
    "thead",
    "tbody",
    "tr",
    "td",
    "th",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "figure",
    "figcaption",
    "abbr",
    "mark",
}
_HTML_ATTRS = {"class", "title", "style", "colspan", "rowspan", "align", "role", "aria-label", "lang"}
_STYLE_PROPS = {
    "fill",
    "fill-opacity",
    "stroke",
    "stroke-width",
    "stroke-opacity",
    "stroke-linecap",
    "stroke-linejoin",
    "opacity",
    "color",
    "background-color",
    "font-weight",
    "font-style",
    "font-size",
    "font-family",
    "text-align",
    "text-decoration",
    "border",
    "border-color",
    "border-width",
    "border-style",
    "border-radius",
    "padding",
    "margin",
    "width",
    "height",
    "display",
    "vertical-align",
    "white-space",
    "letter-spacing",
    "line-height",
}


def _same_document_only(_tag: str, attr: str, value: str) -> str | None:
    # Links inside a frame may point only within it (`<use href="#piece">`), never out.
    if attr in ("href", "xlink:href") and not value.startswith("#"):
        return None
    return value


def sanitize_frame(frame: Frame) -> Frame:
    """The frame made safe to show: SVG and HTML through an allow-list, other types checked.

    Nothing that survives can run script or fetch anything: no ``<script>``, ``<style>``,
    ``<foreignObject>``, ``<image>``, ``<iframe>`` or event handlers; links only to ``#ids``;
    inline styles limited to presentational properties (no ``url()``).

    Raises:
        ValueError: unknown media type, a frame over `MAX_FRAME_BYTES`, or text that is not UTF-8.
    """
    if frame.media_type not in MEDIA_TYPES:
        raise ValueError(f"unknown frame media_type {frame.media_type!r}; expected one of {sorted(MEDIA_TYPES)}")
    if len(frame.data) > MAX_FRAME_BYTES:
        raise ValueError(
            f"the frame is {len(frame.data)} bytes, over the {MAX_FRAME_BYTES}-byte limit; render a smaller picture"
        )
    if frame.media_type == "image/svg+xml":
        return Frame(frame.media_type, _clean_svg(frame.text()).encode("utf-8"))
    if frame.media_type == "text/html":
        return Frame(
            frame.media_type, _clean(frame.text(), _HTML_TAGS | _SVG_TAGS, _HTML_ATTRS | _SVG_ATTRS).encode("utf-8")
        )
    if frame.media_type in _TEXT_TYPES:
        frame.text()  # must decode
    return frame


def _clean(text: str, tags: set[str], attrs: set[str]) -> str:
    try:
        import nh3
    except ImportError:
        raise ValueError("showing SVG or HTML frames needs nh3: pip install 'openenv-hub[server]'") from None

    return nh3.clean(
        text,
        tags=tags,
        clean_content_tags={"script", "style"},
        attributes={"*": attrs},
        attribute_filter=_same_document_only,
        filter_style_properties=_STYLE_PROPS,
        url_schemes=set(),
        strip_comments=True,
    )


_SVG_OPEN = re.compile(r"<svg\b", re.I)


def _clean_svg(text: str) -> str:
    start = _SVG_OPEN.search(text)
    cleaned = _clean(text[start.start() :] if start else "", _SVG_TAGS, _SVG_ATTRS).strip()
    if not cleaned.startswith("<svg"):
        raise ValueError("the SVG frame has no <svg> element at its top")
    # nh3 writes HTML: give the image back its namespaces and use XML's character references.
    cleaned = '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink"' + cleaned[4:]
    return cleaned.replace("&nbsp;", "&#160;")


# -- HTML snippets ---------------------------------------------------------------------------------

_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_OTHER_ESCAPES = re.compile(r"\x1b(?:\[[0-9;?]*[A-Za-ln-z]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][A-Za-z0-9])")
_BASIC = [
    (0, 0, 0),
    (205, 49, 49),
    (13, 188, 121),
    (229, 229, 16),
    (36, 114, 200),
    (188, 63, 188),
    (17, 168, 205),
    (229, 229, 229),
    (102, 102, 102),
    (241, 76, 76),
    (35, 209, 139),
    (245, 245, 67),
    (59, 142, 234),
    (214, 112, 214),
    (41, 184, 219),
    (255, 255, 255),
]

ANSI_CSS = "\n".join(
    [
        ".oe-ansi{white-space:pre-wrap;overflow-wrap:anywhere;font-family:ui-monospace,monospace;margin:0}",
        ".oe-ansi .oe-b{font-weight:bold}.oe-ansi .oe-dim{opacity:.7}.oe-ansi .oe-i{font-style:italic}"
        ".oe-ansi .oe-u{text-decoration:underline}",
    ]
    + [
        f".oe-ansi .oe-fg{n}{{color:rgb{_BASIC[n]}}}.oe-ansi .oe-bg{n}{{background-color:rgb{_BASIC[n]}}}"
        for n in range(16)
    ]
)


def _nearest(rgb: tuple[int, int, int]) -> int:
    return min(range(16), key=lambda n: sum((a - b) ** 2 for a, b in zip(_BASIC[n], rgb, strict=True)))


def _xterm256(n: int) -> int:
    if n < 16:
        return n
    if n >= 232:
        level = 8 + (n - 232) * 10
        return _nearest((level, level, level))
    n -= 16
    steps = [0, 95, 135, 175, 215, 255]
    return _nearest((steps[n // 36], steps[(n // 6) % 6], steps[n % 6]))


def _ansi_html(text: str) -> str:
    text = _OTHER_ESCAPES.sub("", text.replace("\r\n", "\n"))
    out: list[str] = []
    fg: int | None = None
    bg: int | None = None
    flags: set[str] = set()
    pos = 0
    for match in _SGR.finditer(text):
        out.append(_span(text[pos : match.start()], fg, bg, flags))
        pos = match.end()
        codes = [int(c) if c else 0 for c in match.group(1).split(";")]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code == 0:
                fg, bg, flags = None, None, set()
            elif code in (1, 2, 3, 4):
                flags.add({1: "oe-b", 2: "oe-dim", 3: "oe-i", 4: "oe-u"}[code])
            elif code == 22:
                flags -= {"oe-b", "oe-dim"}
            elif code == 23:
                flags.discard("oe-i")
            elif code == 24:
                flags.discard("oe-u")
            elif 30 <= code <= 37 or 90 <= code <= 97:
                fg = code - 30 if code < 90 else code - 82
            elif 40 <= code <= 47 or 100 <= code <= 107:
                bg = code - 40 if code < 100 else code - 92
            elif code == 39:
                fg = None
            elif code == 49:
                bg = None
            elif code in (38, 48) and i + 1 < len(codes):
                colour = None
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    colour, i = _xterm256(codes[i + 2] % 256), i + 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    r, g, b = (min(255, c) for c in codes[i + 2 : i + 5])
                    colour, i = _nearest((r, g, b)), i + 4
                if code == 38:
                    fg = colour
                else:
                    bg = colour
            i += 1
    out.append(_span(text[pos:], fg, bg, flags))
    return "".join(out)


def _span(text: str, fg: int | None, bg: int | None, flags: set[str]) -> str:
    text = text.replace("\x1b", "")
    if not text:
        return ""
    classes = sorted(flags) + ([f"oe-fg{fg}"] if fg is not None else []) + ([f"oe-bg{bg}"] if bg is not None else [])
    escaped = html.escape(text, quote=False)
    return f'<span class="{" ".join(classes)}">{escaped}</span>' if classes else escaped


def frame_html(frame: Frame, alt: str = "the environment") -> str:
    """A safe HTML snippet showing `frame` (sanitized here; see the module docstring).

    Raises:
        ValueError: what `sanitize_frame` raises.
    """
    frame = sanitize_frame(frame)
    label = html.escape(alt, quote=True)
    if frame.media_type in _IMAGE_TYPES or frame.media_type == "image/svg+xml":
        src = f"data:{frame.media_type};base64,{base64.b64encode(frame.data).decode('ascii')}"
        return f'<img class="oe-frame" alt="{label}" src="{src}">'
    if frame.media_type == "text/html":
        return f'<div class="oe-frame oe-html" role="img" aria-label="{label}">{frame.text()}</div>'
    body = _ansi_html(frame.text()) if frame.media_type == "text/x-ansi" else html.escape(frame.text(), quote=False)
    return f'<pre class="oe-frame oe-ansi" aria-label="{label}">{body}</pre>'


# -- one button per action -------------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """One legal action as a button: its label, the action body to step with, an optional key."""

    label: str
    action: dict[str, Any]
    key: str | None = None


MAX_CHOICES = 256
_LEGAL_FIELDS = ("legal_actions", "legal_moves", "valid_actions", "available_actions", "allowed_actions", "actions")
_KEYS = {
    "up": "ArrowUp",
    "north": "ArrowUp",
    "down": "ArrowDown",
    "south": "ArrowDown",
    "left": "ArrowLeft",
    "west": "ArrowLeft",
    "right": "ArrowRight",
    "east": "ArrowRight",
    "fire": " ",
    "noop": "n",
    "hit": "h",
    "stand": "s",
}


def _resolve(schema: dict[str, Any], prop: Any) -> dict[str, Any]:
    # Follow a local $ref (pydantic puts enums under $defs) and a single-member allOf.
    for _ in range(4):
        if not isinstance(prop, dict):
            return {}
        if isinstance(prop.get("$ref"), str) and prop["$ref"].startswith("#/$defs/"):
            prop = (schema.get("$defs") or {}).get(prop["$ref"][8:], {})
        elif isinstance(prop.get("allOf"), list) and len(prop["allOf"]) == 1:
            prop = prop["allOf"][0]
        else:
            return prop
    return prop if isinstance(prop, dict) else {}


def _enum_values(schema: dict[str, Any], prop: Any) -> list[Any] | None:
    prop = _resolve(schema, prop)
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    if "const" in prop:
        return [prop["const"]]
    options = prop.get("anyOf") or prop.get("oneOf")
    if isinstance(options, list):
        values: list[Any] = []
        for option in options:
            sub = _enum_values(schema, option)
            if sub is None:
                if _resolve(schema, option).get("type") == "null":
                    continue
                return None
            values.extend(sub)
        return values or None
    if prop.get("type") == "boolean":
        return [True, False]
    return None


def _field_type(schema: dict[str, Any], prop: Any) -> str | None:
    kind = _resolve(schema, prop).get("type")
    return kind if isinstance(kind, str) else None


def action_choices(
    action_schema: dict[str, Any] | None, observation: dict[str, Any] | None, limit: int | None = MAX_CHOICES
) -> list[Choice] | None:
    """One `Choice` per legal action when the action space is finite, else None (free-form).

    The action must have one field to choose (other fields optional). Its values come from the
    schema (an enum / Literal / bool), narrowed to the observation's list of legal actions when
    it has one (`legal_actions`, `legal_moves`, ..., in the observation or in its `metadata`); or,
    for a free string or integer field, from that list alone (an integer field indexes the list,
    as Atari's does). Direction-like values get arrow keys. An empty list means the action space
    is finite but nothing is legal now (the episode is over). More than `limit` choices (one
    button each) is None too; `limit=None` lists them all.
    """
    if not isinstance(action_schema, dict):
        return None
    props = action_schema.get("properties")
    if not isinstance(props, dict):
        return None
    required = [name for name in action_schema.get("required") or [] if name in props and name != "metadata"]
    fields = [name for name in props if name != "metadata"]
    if len(required) == 1:
        name = required[0]
    elif not required and len(fields) == 1:
        name = fields[0]
    else:
        return None
    legal = _legal_list(observation)
    values = _enum_values(action_schema, props[name])
    if values is not None:
        if legal is not None:
            allowed = {str(v).lower() for v in legal}
            values = [v for v in values if str(v).lower() in allowed]
        choices = [Choice(str(v), {name: v}, _KEYS.get(str(v).lower())) for v in values]
    elif legal is None:
        return None
    elif _field_type(action_schema, props[name]) == "integer" and all(isinstance(v, str) for v in legal):
        choices = [Choice(str(v), {name: i}, _KEYS.get(str(v).lower())) for i, v in enumerate(legal)]
    elif _field_type(action_schema, props[name]) in ("string", "integer", "number"):
        choices = [Choice(str(v), {name: v}, _KEYS.get(str(v).lower())) for v in legal]
    else:
        return None
    return choices if limit is None or len(choices) <= limit else None


def _legal_list(observation: dict[str, Any] | None) -> list[Any] | None:
    if not isinstance(observation, dict):
        return None
    inner = observation.get("observation")
    if isinstance(inner, dict):  # a wire payload {"observation": {...}, "reward", "done"}
        observation = inner
    metadata = observation.get("metadata")
    for where in (observation, metadata if isinstance(metadata, dict) else {}):
        for key in _LEGAL_FIELDS:
            value = where.get(key)
            if isinstance(value, list) and all(
                isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value
            ):
                return value
    return None
