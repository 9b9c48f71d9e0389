"""HTML fragments of the website, built from catalog records with every value escaped.

Nothing here trusts its input: names, descriptions, logs, reports and observations come from env
authors and env servers, so every value goes through `html.escape` (or, for READMEs, the
sanitizer in markdown.py); images are shown only from validated base64 data.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import html
import json
import re
import urllib.parse
from html import escape
from typing import Any

from hub_service.catalog.states import VersionState
from hub_service.play.errors import scrub_addresses
from hub_service.queue.errors import WaitCode
from hub_service.ui.trust_card import badge_row

__all__ = [
    "ACCESS_CSS",
    "SORTS",
    "badges",
    "catalog_cards",
    "figures",
    "frame_view",
    "history_table",
    "json_block",
    "message",
    "observation_view",
    "picture_words",
    "play_figures",
    "report_view",
    "stages_view",
    "trajectory_view",
    "try_summary",
]

# The catalog's orders as visitors choose them (website and plain pages): (the API's `sort`, its label).
SORTS = [
    ("name", "Name (A→Z)"),
    ("-name", "Name (Z→A)"),
    ("-likes", "Most liked"),
    ("-updated", "Recently updated"),
    ("cold_start", "Fastest cold start"),
    ("step_latency", "Fastest step"),
    ("-sessions", "Most sessions per server"),
]
# Shared by the website's pages and its Gradio panel. Every control the keyboard reaches shows a
# ring (Gradio's own focus styles, a paler border, read at under 3:1; its primary buttons show
# none), and placeholder text (which carries each env's options) is read at 4.5:1 or more.
ACCESS_CSS = """
html body *:focus-visible { outline: 2px solid #0b5cad !important; outline-offset: 2px !important; }
input::placeholder, textarea::placeholder { color: #5f6670 !important; opacity: 1 !important; }
"""
_IMAGE_MAGIC = {b"\x89PNG\r\n\x1a\n": "png", b"\xff\xd8\xff": "jpeg", b"GIF8": "gif"}
_B64 = re.compile(r"[A-Za-z0-9+/=\s]+")
_SPACE = re.compile(r"\s+")


def message(text: str, kind: str = "info") -> str:
    """A one-line notice (kind: info, error, ok)."""
    return f'<div class="oe-msg oe-{escape(kind)}">{escape(text)}</div>'


def _fmt(value: Any, unit: str = "", digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def _ago(when: dt.datetime | None) -> str:
    if when is None:
        return ""
    seconds = (dt.datetime.now(dt.UTC) - when).total_seconds()
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"


def _pill(label: str, state: str | None) -> str:
    cls = {
        "passed": "ok",
        "pass": "ok",
        "passing": "ok",
        "warn": "warn",
        "failed": "bad",
        "fail": "bad",
        "failing": "bad",
        "live": "ok",
        "waiting": "warn",
    }
    return f'<span class="oe-pill oe-{cls.get(state or "", "none")}" title="{escape(label)}: {escape(state or "not yet")}">{escape(label)}</span>'


def catalog_cards(items: list[Any], total: int) -> str:
    """The search results: one card per env (`EnvSummary`), each linking to its page."""
    if not items:
        return message("No environment matches. Clear the filters or search for other words.")
    cards = []
    for env in items:
        # `panel=site` keeps the visitor in the Gradio app (a bare `?env=` redirects to the env's page)
        link = "?panel=site&env=" + urllib.parse.quote(env.id, safe="/")
        tags = "".join(f'<span class="oe-tag">{escape(t)}</span>' for t in env.tags[:8])
        desc = escape((env.description or env.title or "")[:240])
        cards.append(
            f'<a class="oe-card" href="{escape(link)}" data-env="{escape(env.id)}">'
            f'<div class="oe-card-head"><b>{escape(env.id)}</b>{_pill(env.status, env.status)}'
            f"{' <span class=oe-tag>deprecated</span>' if env.deprecated else ''}</div>"
            f'<div class="oe-card-desc">{desc}</div><div class="oe-tags">{tags}</div>{badge_row(env)}'
            f'<div class="oe-card-foot">cold start {_fmt(env.cold_start_s, " s")} · step p50 {_fmt(env.step_p50_ms, " ms")}'
            f" · ♥ {env.likes} · {escape(env.source)}{' · ' + escape(env.health) if env.health else ''}"
            f" · updated {escape(_ago(env.updated_at))}</div></a>"
        )
    shown = f"{len(items)} of {total}" if total > len(items) else str(total)
    return f'<div class="oe-count">{shown} environment{"s" if total != 1 else ""}</div><div class="oe-cards">{"".join(cards)}</div>'


def badges(env: Any, version: Any | None) -> str:
    """validated · built · smoke-tested · live, for the env's current version."""
    live = (env.stage or "").upper() == "RUNNING" and env.host
    parts = [
        _pill("validated", version.validation_status if version else None),
        _pill("built", version.build_status if version else None),
        _pill("smoke-tested", version.smoke_status if version else None),
        _pill("live", "live" if live else None),
    ]
    return f'<div class="oe-badges" id="oe-badges">{"".join(parts)}</div>'


_HEALTH_CLASS = {"running": "ok", "sleeping": "warn", "building": "warn", "stopped": "none", "error": "bad"}


def health_line(health: Any) -> str:
    """The Space's runtime health now (`HealthView`): since when, and its share of time running."""
    if health.health is None:
        return '<div class="oe-health" id="oe-health">runtime: not polled yet</div>'
    share = (
        f" · running {health.running_share:.0%} of the last {health.window_days} days"
        if health.running_share is not None
        else ""
    )
    state = f'<span class="oe-pill oe-{_HEALTH_CLASS.get(health.health, "none")}">{escape(health.health)}</span>'
    return (
        f'<div class="oe-health" id="oe-health">runtime: {state} since {escape(_ago(health.since) or "–")}{share}'
        f" · checked {escape(_ago(health.checked_at) or '–')}</div>"
    )


def imported_line(manifest: Any) -> str:
    """For an env written by `openenv import`: the ecosystem, id and version it came from (else nothing)."""
    from openenv.interop.provenance import read_provenance

    found = read_provenance(manifest if isinstance(manifest, dict) else None)
    if found is None:
        return ""
    version = f" · version {escape(found.version)}" if found.version else " · version not recorded"
    return (
        f'<div class="oe-health" id="oe-imported">imported from {escape(found.label)}: '
        f"<code>{escape(found.name)}</code>{version}</div>"
    )


def deprecation_note(env: Any) -> str:
    """A banner on a deprecated env, linking to its successor."""
    if not env.deprecated:
        return ""
    text = "Deprecated" + (f" ({escape(env.deprecation_reason)})" if env.deprecation_reason else "") + "."
    if env.successor:
        link = "?env=" + urllib.parse.quote(env.successor, safe="/")
        text += f' Use <a href="{escape(link)}">{escape(env.successor)}</a> instead.'
    return f'<div class="oe-msg oe-warn" id="oe-deprecated">{text}</div>'


def history_view(health: Any, events: list[Any]) -> str:
    """Runtime transitions and the audit trail (newest first)."""
    if health.history:
        rows = "".join(
            f"<tr><td>{escape(str(t.at)[:19])}</td><td>{escape(t.previous or '–')} → {escape(t.health)}</td>"
            f"<td>{escape(t.stage or '')}</td></tr>"
            for t in health.history
        )
        runtime = f'<table class="oe-table" id="oe-health-history"><tr><th>when</th><th>health</th><th>stage</th></tr>{rows}</table>'
    else:
        runtime = message("No runtime transition recorded yet.")
    if events:
        rows = "".join(
            f"<tr><td>{escape(str(e.created_at)[:19])}</td><td><code>{escape(e.kind)}</code></td><td>{escape(e.summary)}</td>"
            f"<td>{escape(e.cause)}</td><td>{escape(e.actor)}</td></tr>"
            for e in events
        )
        trail = f'<table class="oe-table" id="oe-events"><tr><th>when</th><th>event</th><th>what</th><th>cause</th><th>by</th></tr>{rows}</table>'
    else:
        trail = message("No event recorded yet.")
    return f"<h4>Runtime health</h4>{runtime}<h4>Audit trail</h4>{trail}"


def figures(version: Any | None) -> str:
    if version is None:
        return message("Not checked yet: the pipeline has not run on this environment.")
    rows = [
        ("state", escape(version.state)),
        ("revision", f"<code>{escape(version.sha[:12])}</code> ({escape(version.ref)})"),
        ("cold start", _fmt(version.cold_start_s, " s")),
        ("step latency p50", _fmt(version.step_p50_ms, " ms")),
        ("step latency p95", _fmt(version.step_p95_ms, " ms")),
        ("build time", _fmt(version.build_seconds, " s", 1)),
        ("built with", escape(version.builder or "–")),
        ("image", f"<code>{escape(version.image_ref or '–')}</code>"),
    ]
    if version.failure_stage:
        rows.append(
            ("failed at", f"{escape(version.failure_stage)}: {escape(scrub_addresses(version.failure_reason or ''))}")
        )
    if version.waiting_code and version.state in (VersionState.WAITING, VersionState.QUEUED, VersionState.RUNNING):
        since = escape(_ago(version.waiting_since))
        host = version.waiting_code == WaitCode.HOST_SETUP  # the operator's to fix: nothing retries it into a verdict
        rows.append(
            (
                "waiting for this Hub's host" if host else "waiting for infrastructure",
                f"{escape(version.waiting_code)} (not the env's failure; "
                + ("it runs once the Hub's operator fixes the host's set-up" if host else "retried by itself")
                + f"), since {since}: {escape(scrub_addresses(version.waiting_reason or ''))}",
            )
        )
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="oe-kv" id="oe-figures">{body}</table>'


def report_view(report: dict[str, Any] | None) -> str:
    """The validation report: status, then one row per check."""
    if not report:
        return message("No validation report yet.")
    rows = []
    for check in report.get("checks") or []:
        status = str(check.get("status", ""))
        rows.append(
            f"<tr><td>{_pill(status, status)}</td><td><code>{escape(str(check.get('id', '')))}</code></td>"
            f"<td>{escape(scrub_addresses(str(check.get('message', ''))))}</td></tr>"
        )
    head = f"<div>overall: {_pill(str(report.get('status')), str(report.get('status')))}</div>"
    return f'{head}<table class="oe-table" id="oe-report"><tr><th>status</th><th>check</th><th>result</th></tr>{"".join(rows)}</table>'


def stages_view(runs: list[Any]) -> str:
    """Each stage run with its timing, and its log in a collapsible block."""
    if not runs:
        return message("No stage has run yet.")
    blocks = []
    for run in runs:
        summary = f"{escape(run.stage)} · attempt {run.attempt} · {escape(run.status)} · {_fmt(run.seconds, ' s')}"
        # The smoke test's server ran on an address of the Hub's own: a visitor has no use for it.
        log = scrub_addresses(run.log or "") or "(empty log)"
        if len(log) > 60_000:
            log = "… (head cut; the full log is in the API)\n" + log[-60_000:]
        blocks.append(
            f'<details class="oe-log"><summary>{_pill(run.stage, run.status)} {summary}</summary><pre>{escape(log)}</pre></details>'
        )
    return f'<div id="oe-stages">{"".join(blocks)}</div>'


def json_block(value: Any) -> str:
    return f'<pre class="oe-json">{escape(json.dumps(value, indent=2, default=str, ensure_ascii=False))}</pre>'


# -- observations ----------------------------------------------------------------------------


def _image_src(value: str) -> str | None:
    """A data: URL when `value` is a base64 PNG/JPEG/GIF (or a data:image URL of one), else None."""
    if len(value) < 24:
        return None
    raw = value
    if value.startswith("data:image/"):
        _, _, raw = value.partition(";base64,")
    if not _B64.fullmatch(raw[:4096]):
        return None
    try:
        head = base64.b64decode(raw[:64] + "=" * (-len(raw[:64]) % 4), validate=False)
    except (binascii.Error, ValueError):
        return None
    for magic, kind in _IMAGE_MAGIC.items():
        if head.startswith(magic) and _B64.fullmatch(raw):
            return f"data:image/{kind};base64,{_SPACE.sub('', raw)}"
    return None


def _scalar(value: Any) -> str:
    if isinstance(value, float):
        return escape(f"{value:.6g}")
    return escape(value if isinstance(value, str) else json.dumps(value))


def _key(key: Any) -> str:
    """A record's key, which may wrap after each "_" (snake_case words), never inside a word."""
    return escape(str(key)).replace("_", "_<wbr>")


def _value(value: Any, depth: int = 0) -> str:
    if isinstance(value, str):
        src = _image_src(value)
        if src:
            return f'<img class="oe-frame" alt="observation image" src="{src}">'
        return f"<pre>{escape(value)}</pre>" if "\n" in value or len(value) > 80 else escape(value)
    if value is None or isinstance(value, (int, float, bool)):
        return _scalar(value)
    if isinstance(value, list):
        if (
            value
            and len(value) <= 64
            and all(isinstance(r, list) and all(not isinstance(c, (list, dict)) for c in r) for r in value)
        ):
            rows = "".join("<tr>" + "".join(f"<td>{_scalar(c)}</td>" for c in r[:64]) + "</tr>" for r in value)
            return f'<table class="oe-grid">{rows}</table>'
        if value and len(value) <= 200 and all(isinstance(r, dict) for r in value):
            keys = list(dict.fromkeys(k for r in value for k in r))[:12]
            head = "".join(f"<th>{escape(str(k))}</th>" for k in keys)
            body = "".join(
                "<tr>" + "".join(f"<td>{_value(r.get(k, ''), depth + 1)}</td>" for k in keys) + "</tr>" for r in value
            )
            return f'<table class="oe-table"><tr>{head}</tr>{body}</table>'
        if all(not isinstance(v, (list, dict)) for v in value):
            more = f", … {len(value) - 256} more" if len(value) > 256 else ""
            return escape("[" + ", ".join(_scalar(v) for v in value[:256]) + more + "]")
        return json_block(value)
    if isinstance(value, dict):
        if depth > 3:
            return json_block(value)
        if not value:
            return "{}"
        rows = "".join(f"<tr><th>{_key(k)}</th><td>{_value(v, depth + 1)}</td></tr>" for k, v in value.items())
        return f'<table class="oe-kv">{rows}</table>'
    return escape(str(value))


def play_figures(payload: dict[str, Any] | None, steps: int = 0, episode_return: float = 0.0) -> str:
    """Reward, done, steps and return of the episode so far; "episode over" once it is done."""
    if not payload:
        return ""
    head = (
        f'<div class="oe-figs"><span>reward <b id="oe-reward">{_scalar(payload.get("reward"))}</b></span>'
        f'<span>done <b id="oe-done">{_scalar(bool(payload.get("done")))}</b></span>'
        f'<span>steps <b id="oe-steps">{steps}</b></span><span>return <b id="oe-return">{_scalar(episode_return)}</b></span></div>'
    )
    if payload.get("done"):
        head += '<div class="oe-msg oe-over" id="oe-play-over">episode over — reset to play again</div>'
    return head


def observation_view(
    payload: dict[str, Any] | None, steps: int = 0, episode_return: float = 0.0, figures: bool = True
) -> str:
    """An observation with reward and done: text as text, grids and records as tables, images as images."""
    if not payload:
        return message("Press Reset to start an episode.")
    obs = payload.get("observation") or {}
    return (
        play_figures(payload, steps, episode_return) if figures else ""
    ) + f'<div class="oe-obs">{_value(obs)}</div>'


_SVG_WORDS = re.compile(r"<(text|title|desc)\b[^>]*>(.*?)</\1>", re.S)
_TAG = re.compile(r"<[^>]+>")
ALT_MAX = 500  # characters of a picture's text: a screen reader reads all of it


def picture_words(observation: Any, frame: Any, otherwise: str) -> str:
    """What the env's picture shows, in the env's own words, for its alt text: the observation's
    `text` (the view in words several envs write for a language model), else the words drawn in
    an SVG picture, else `otherwise`."""
    words = observation.get("text") if isinstance(observation, dict) else None
    if not (isinstance(words, str) and words.strip()) and getattr(frame, "media_type", "") == "image/svg+xml":
        try:
            svg = frame.text()
        except ValueError:
            svg = ""
        words = " ".join(html.unescape(_TAG.sub(" ", m[2])) for m in _SVG_WORDS.finditer(svg))
    words = " ".join(words.split()) if isinstance(words, str) else ""
    if not words:
        return otherwise
    return words if len(words) <= ALT_MAX else words[: ALT_MAX - 1] + "…"


def frame_view(frame: Any, alt: str = "the environment now") -> str:
    """A frame the env drew (`openenv.render.Frame`), sanitized, or a note saying why it is not shown."""
    from openenv.render import frame_html

    if frame is None:
        return ""
    try:
        return f'<div class="oe-picture">{frame_html(frame, alt=alt)}</div>'
    except ValueError as exc:
        return message(f"the env's picture cannot be shown: {exc}")


HISTORY_SHOWN = 100  # rows of the actions table: drawn again at every step, so its cost must not grow


def history_table(history: list[dict[str, Any]], limit: int = HISTORY_SHOWN) -> str:
    """The episode's actions, the latest `limit` of them (a line says how many earlier are not shown)."""
    if not history:
        return message("No step yet in this episode.")
    first = max(0, len(history) - limit)
    rows = "".join(
        f"<tr><td>{i}</td><td><code>{escape(json.dumps(h['action'], ensure_ascii=False))}</code></td>"
        f"<td>{_scalar(h['reward'])}</td><td>{_scalar(h['done'])}</td></tr>"
        for i, h in enumerate(history[first:], first + 1)
    )
    earlier = message(f"The first {first} actions of this episode are not shown.") if first else ""
    return (
        f'{earlier}<table class="oe-table" id="oe-history"><tr><th>#</th><th>action</th><th>reward</th><th>done</th></tr>'
        f"{rows}</table>"
    )


# -- model tries -----------------------------------------------------------------------------


def trajectory_view(events: list[dict[str, Any]], limit: int = 200) -> str:
    """The trajectory so far: per step the prompt, raw answer, parsed action, observation, reward."""
    parts = []
    shown = [e for e in events if e["type"] in ("episode", "step", "episode_end")]
    if len(shown) > limit:
        parts.append(message(f"{len(shown) - limit} earlier events are not shown."))
        shown = shown[-limit:]
    last_steps = {id(e) for e in [e for e in shown if e["type"] == "step"][-3:]}
    for e in shown:
        if e["type"] == "episode":
            parts.append(f'<h4 class="oe-ep">Episode {e["episode"]}</h4>{e.get("frame_html") or ""}')
        elif e["type"] == "episode_end":
            parts.append(
                f'<div class="oe-msg oe-info">episode {e["episode"]}: return {_scalar(e["return"])} in {e["steps"]} steps, '
                f"{e['invalid']} unusable, {escape(e['reason'])}</div>"
            )
        else:
            cls = "oe-step oe-step-bad" if e["error"] else "oe-step"
            rows = []
            if e.get("prompt"):
                rows.append(f"<tr><th>prompt</th><td><pre>{escape(e['prompt'])}</pre></td></tr>")
            if e.get("raw") is not None:
                rows.append(f"<tr><th>model output</th><td><pre>{escape(e['raw'])}</pre></td></tr>")
            action = escape(json.dumps(e["action"], ensure_ascii=False)) if e["action"] is not None else "–"
            rows.append(f"<tr><th>action</th><td><code>{action}</code></td></tr>")
            if e["error"]:
                rows.append(f'<tr><th>error</th><td class="oe-err">{escape(e["error"])}</td></tr>')
            if e.get("frame_html"):
                rows.append(f"<tr><th>picture</th><td>{e['frame_html']}</td></tr>")
            if e["observation"] is not None:
                rows.append(f"<tr><th>observation</th><td>{_value(e['observation'], 1)}</td></tr>")
                rows.append(f"<tr><th>reward</th><td>{_scalar(e['reward'])}{' · done' if e['done'] else ''}</td></tr>")
            is_open = " open" if e["error"] or id(e) in last_steps else ""
            summary = f"step {e['step']}: <code>{action}</code>" + (
                f" → reward {_scalar(e['reward'])}" if e["observation"] is not None else ""
            )
            if e["error"]:
                summary += ' <span class="oe-err">unusable</span>'
            parts.append(
                f'<details class="{cls}"{is_open}><summary>{summary}</summary><table class="oe-kv">{"".join(rows)}</table></details>'
            )
    return f'<div id="oe-trajectory">{"".join(parts)}</div>'


def try_summary(summary: dict[str, Any] | None, running: str = "") -> str:
    if summary is None:
        return message(running or "Choose a policy and press Run.")
    if summary.get("stopped"):  # the model could not be asked at all: no score to speak of
        return f'<div class="oe-msg oe-error" id="oe-try-stopped">{escape(summary["stopped"])}</div>'
    returns = ", ".join(_scalar(r) for r in summary["returns"])
    return (
        f'<div class="oe-score" id="oe-score">score <b>{_scalar(summary["score"])}</b> (mean return over '
        f"{summary['episodes']} episode{'s' if summary['episodes'] != 1 else ''}: {returns}) · "
        f'{summary["steps"]} steps · <span id="oe-invalid">{summary["invalid"]}</span> unusable answers</div>'
    )
