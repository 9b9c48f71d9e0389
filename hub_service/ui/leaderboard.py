"""The env page's leaderboard: scored runs best first, the random baseline always among them, and
storing a website "let a model try" run as an eval when it is over.

A model try is stored (source "website": the model's name and its endpoint's host, never a token)
only when the model was used: at least one of its actions reached the env. A try whose endpoint
could not be reached, or whose every answer was unusable, tells nothing about the env and is
not stored. Random-baseline tries are not stored either: the pipeline records the baseline.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable
from html import escape
from typing import Any

import gradio as gr
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog import service as catalog
from hub_service.db import session_scope
from hub_service.errors import HubError
from hub_service.evals.service import Standing, leaderboard, record_try

__all__ = ["LEADERBOARD_CSS", "board_html", "board_panel", "env_board", "store_try"]

log = logging.getLogger("hub_service.ui")

LEADERBOARD_CSS = """
.oe-board-wrap { overflow-x: auto; max-width: 100%; }
.oe-board td.oe-num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.oe-board tr.oe-yanked td { color: var(--body-text-color-subdued); text-decoration: line-through; }
.oe-board tr.oe-yanked td.oe-mark { text-decoration: none; }
.oe-board tr.oe-baseline td { background: var(--background-fill-secondary); }
.oe-board .oe-sub { font-size: .8em; color: var(--body-text-color-subdued); }
"""

_SOURCES = {"baseline": "random baseline", "website": "website try", "cli": "openenv eval"}


def board_html(env_id: str, standings: list[Standing], total: int) -> str:
    """The leaderboard table (every value escaped)."""
    if not standings:
        return (
            '<div id="oe-leaderboard">'
            + _note(
                "No scored runs yet: the random baseline appears when a revision passes "
                "the Hub's checks; let a model try, or run `openenv eval " + env_id + "`."
            )
            + "</div>"
        )
    rows = []
    for s in standings:
        classes = " ".join(
            c for c in ("oe-baseline" if s.source == "baseline" else "", "oe-yanked" if s.yanked else "") if c
        )
        who = " · ".join(escape(p) for p in (s.endpoint_host, s.submitted_by and f"by {s.submitted_by}") if p)
        model = f"<b>{escape(s.model)}</b>" + (f'<div class="oe-sub">{who}</div>' if who else "")
        mark = (
            ' <span class="oe-pill oe-bad" title="a maintainer yanked this revision">yanked</span>' if s.yanked else ""
        )
        runs = f' <span class="oe-sub">({s.runs} runs)</span>' if s.runs > 1 else ""
        rows.append(
            f'<tr class="{classes}" data-model="{escape(s.model)}" data-source="{escape(s.source)}">'
            f'<td class="oe-num">{s.rank}</td><td>{model}</td><td>{escape(_SOURCES.get(s.source, s.source))}</td>'
            f'<td class="oe-num">{_num(s.mean_return)} ± {_half_width(s)}</td>'
            f'<td class="oe-num">{s.episodes}{runs}</td><td class="oe-mark"><code>{escape(s.revision[:12])}</code>{mark}</td>'
            f"<td>{escape(_date(s.date))}</td></tr>"
        )
    more = f'<div class="oe-sub">{len(standings)} of {total} entries</div>' if total > len(standings) else ""
    head = (
        "<tr><th>#</th><th>model</th><th>source</th><th>mean return ± 95% interval</th><th>episodes</th>"
        "<th>revision</th><th>date</th></tr>"
    )
    return (
        # it scrolls sideways on a phone: a keyboard must be able to reach it
        f'<div id="oe-leaderboard"><div class="oe-board-wrap" tabindex="0" role="region" aria-label="Leaderboard">'
        f'<table class="oe-table oe-board">{head}{"".join(rows)}'
        f"</table></div>{more}"
        '<div class="oe-sub">Runs of one model through one endpoint host (and one submitter) on one revision are '
        "pooled. Submit your own with <code>openenv eval</code>.</div></div>"
    )


def env_board(factory: sessionmaker[Session], env_id: str | None, limit: int = 50) -> str:
    """The leaderboard of `env_id` ("owner/name"), or a notice."""
    if not env_id or env_id.count("/") != 1:
        return _note("Choose an environment in the catalog.")
    owner, name = env_id.split("/")
    try:
        with factory() as db:
            env = catalog.get_env(db, owner, name)
            standings, total = leaderboard(db, env, limit=limit)
    except HubError as exc:
        return _note(exc.message)
    return board_html(env_id, standings, total)


def board_panel(
    on_load: list[tuple[Callable[[gr.Request], Any], Any]],
    factory: sessionmaker[Session],
    tried: Any,
    current: gr.State,
) -> gr.HTML:
    """The env page's leaderboard, filled when the page loads (`/?env=owner/name`: its filler goes
    into `on_load`, which the site runs as its one load event) and again after every model try
    (`tried`: the try tab's Run event)."""
    box = gr.HTML(elem_id="oe-leaderboard-box")

    def fill(request: gr.Request) -> Any:
        env_id = dict(request.query_params).get("env") if request else None
        return env_board(factory, env_id) if env_id else gr.skip()

    on_load.append((fill, box))
    tried.then(
        lambda env_id: env_board(factory, env_id) if env_id else gr.skip(),
        inputs=current,
        outputs=box,
        show_progress="hidden",
    )
    return box


async def store_try(
    factory: sessionmaker[Session],
    session: Any,
    model: str,
    base_url: str,
    events: list[dict[str, Any]],
    summary: dict[str, Any],
) -> bool:
    """Store a finished model try of a play `session`; returns whether it was stored (see the module doc)."""
    played = any(e.get("type") == "step" and e.get("action") is not None and not e.get("error") for e in events)
    returns = summary.get("returns") or []
    if not played or not returns:
        return False
    env_id, sha = session.env_id, session.instance.target.key.rpartition("@")[2]

    def write() -> bool:
        with session_scope(factory) as db:
            return record_try(db, env_id, sha, model=model, base_url=base_url, returns=returns) is not None

    try:
        stored = await asyncio.to_thread(write)
    except SQLAlchemyError:  # the visitor still sees their run; the operator sees why it is not on the board
        log.exception("model try on %s@%s could not be stored", env_id, sha[:12])
        return False
    if not stored:
        log.warning("model try on %s@%s not stored: the revision is no longer in the catalog", env_id, sha[:12])
    return stored


def _note(text: str) -> str:
    return f'<div class="oe-msg oe-info">{escape(text)}</div>'


def _num(value: float) -> str:
    return f"{value:.3g}" if abs(value) >= 1000 or (value and abs(value) < 0.01) else f"{value:.2f}"


def _half_width(s: Standing) -> str:
    if s.episodes < 2:  # one episode has no spread to speak of
        return '<span title="one episode: no interval">&ndash;</span>'
    return _num((s.ci_high - s.ci_low) / 2)


def _date(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M") if isinstance(when, dt.datetime) else str(when)[:16]
