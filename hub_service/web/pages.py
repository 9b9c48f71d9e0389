"""The website's pages rendered on the server as plain HTML: the catalog and one page per env.

They show their content with the first byte and read with JavaScript off; only the play and
model-try panel is interactive, and it is the Gradio app, framed inside the env page
(`/?panel=play&env=owner/name`). Every value is escaped (`views`, `html.escape`) or sanitized
(READMEs, through `markdown`).
"""

from __future__ import annotations

import urllib.parse
from html import escape
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog import service as catalog
from hub_service.errors import HubError, InvalidRequest
from hub_service.settings import HubSettings
from hub_service.ui import trust_card, views
from hub_service.ui.leaderboard import LEADERBOARD_CSS, env_board

__all__ = ["catalog_page", "env_page", "env_path", "not_found_page", "watch_panel_load"]

STATUSES = [("", "any status"), ("passing", "passing"), ("failing", "failing"), ("pending", "pending")]
_TAGLINE = "Environments for agentic RL that pass their checks: browse them, play them, let a model try."

# Colours chosen for a contrast of at least 4.5:1 on white; the layout is one column on phones.
CSS = """
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1f2328;background:#fff}
a{color:#0550ae}
header.oe-top{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:baseline;padding:10px 16px;border-bottom:1px solid #d0d7de}
header.oe-top .oe-brand{font-weight:700;font-size:1.3em;text-decoration:none;color:#1f2328}
header.oe-top span{color:#424a53}
main{max-width:1200px;margin:0 auto;padding:12px 16px}
form.oe-filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;margin:8px 0}
form.oe-filters label{display:flex;flex-direction:column;font-size:.85em;color:#424a53}
form.oe-filters label.oe-q{flex:1 1 16em}
form.oe-filters input[type=search]{width:100%;font:inherit;padding:6px 8px}
form.oe-filters select,form.oe-filters button{font:inherit;padding:5px 8px}
form.oe-filters input[type=number]{width:6em;font:inherit;padding:5px 8px}
form.oe-filters fieldset{display:flex;flex-wrap:wrap;gap:4px 10px;border:0;margin:0;padding:0;font-size:.85em;color:#424a53}
form.oe-filters fieldset legend{padding:0}
form.oe-filters fieldset label{flex-direction:row;align-items:center;gap:4px;font-size:1em;color:#1f2328}
.oe-count{color:#424a53;font-size:.9em;margin:6px 0}
.oe-cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(290px,1fr));gap:12px;padding:0;list-style:none}
.oe-cardbox{border:1px solid #d0d7de;border-radius:10px;padding:12px;display:flex;flex-direction:column;gap:6px}
.oe-cardbox:hover{border-color:#0969da}
a.oe-card{color:inherit;text-decoration:none;display:block}
a.oe-card b{color:#0550ae;overflow-wrap:anywhere}
.oe-card-head{display:flex;justify-content:space-between;gap:8px;align-items:center}
.oe-card-desc{color:#424a53;margin:4px 0}
.oe-card-foot{color:#424a53;font-size:.85em}
.oe-tag{display:inline-block;font-size:.8em;padding:1px 7px;margin:2px 4px 2px 0;border-radius:9px;background:#eaeef2;color:#1f2328}
.oe-pill{display:inline-block;font-size:.8em;padding:1px 9px;margin-right:6px;border-radius:9px}
.oe-ok{background:#dafbe1;color:#116329}.oe-bad{background:#ffebe9;color:#a40e26}
.oe-warn{background:#fff8c5;color:#6c4400}.oe-none{background:#eaeef2;color:#424a53}
a.oe-play-link{align-self:flex-start;padding:4px 14px;border-radius:6px;background:#0969da;color:#fff;text-decoration:none;font-weight:600}
.oe-msg{padding:6px 10px;border-radius:6px;margin:4px 0;background:#f6f8fa}.oe-msg.oe-error{background:#ffebe9;color:#a40e26}
.oe-env-grid{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:16px}
@media (max-width:800px){.oe-env-grid{grid-template-columns:minmax(0,1fr)}}
/* The panel sets its frame's height to its content once it has loaded (PANEL_SCRIPT in ui/play_panel.py):
   this is only the height it starts at. */
iframe.oe-panel{display:block;width:100%;height:min(640px,80vh);border:1px solid #d0d7de;border-radius:8px}
pre{overflow-x:auto;background:#f6f8fa;padding:8px;border-radius:6px}
.oe-readme img{max-width:100%}
.oe-table{border-collapse:collapse}.oe-table td,.oe-table th{border:1px solid #d0d7de;padding:3px 7px;text-align:left}
.oe-table,.oe-readme table{display:block;max-width:100%;overflow-x:auto}
nav.oe-jump a{margin-right:12px}
"""


def _root(root_path: str) -> str:
    return root_path.rstrip("/") + "/"


def env_path(root: str, env_id: str) -> str:
    """The stable URL path of an env's page: `<root>envs/<owner>/<name>`."""
    return f"{_root(root)}envs/{urllib.parse.quote(env_id, safe='/')}"


def _document(
    root: str, title: str, description: str, url: str, body: str, status_extra: str = "", robots: str = ""
) -> str:
    meta = (
        f'<meta name="description" content="{escape(description)}">'
        f'<meta property="og:title" content="{escape(title)}">'
        f'<meta property="og:description" content="{escape(description)}">'
        f'<meta property="og:type" content="website"><meta property="og:url" content="{escape(url)}">'
        f'<meta property="og:site_name" content="OpenEnv Hub">'
        + (f'<meta name="robots" content="{escape(robots)}">' if robots else "")
    )
    home = escape(_root(root))
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>{meta}<style>{CSS}{trust_card.CSS}{LEADERBOARD_CSS}{views.ACCESS_CSS}</style></head><body>"
        f'<header class="oe-top"><a class="oe-brand" href="{home}">OpenEnv Hub</a><span>{escape(_TAGLINE)} '
        f'JSON API at <a href="{home}api/v1/envs">/api/v1</a>, reference at <a href="{home}docs">/docs</a>.</span></header>'
        f"<main>{status_extra}{body}</main></body></html>"
    )


def _options(choices: list[tuple[str, str]], chosen: str) -> str:
    return "".join(
        f'<option value="{escape(v)}"{" selected" if v == chosen else ""}>{escape(label)}</option>'
        for v, label in choices
    )


def _card(root: str, env: Any) -> str:
    link = escape(env_path(root, env.id))
    tags = "".join(f'<span class="oe-tag">{escape(t)}</span>' for t in env.tags[:8])
    desc = escape((env.description or env.title or "No description given.")[:240])
    status = env.status or "pending"
    pill = {"passing": "ok", "failing": "bad", "waiting": "warn"}.get(status, "none")
    foot = f"cold start {views._fmt(env.cold_start_s, ' s')} · step p50 {views._fmt(env.step_p50_ms, ' ms')} · ♥ {env.likes}"
    return (
        f'<li class="oe-cardbox"><a class="oe-card" href="{link}" data-env="{escape(env.id)}">'
        f'<div class="oe-card-head"><b>{escape(env.id)}</b><span class="oe-pill oe-{pill}">{escape(status)}</span>'
        f"{' <span class=oe-tag>deprecated</span>' if env.deprecated else ''}</div>"
        f'<div class="oe-card-desc">{desc}</div><div class="oe-tags">{tags}</div>{trust_card.badge_row(env)}'
        f'<div class="oe-card-foot">{escape(foot)}</div></a>'
        + (
            f'<a class="oe-play-link" href="{link}#play" aria-label="Play {escape(env.id)}">Play</a>'
            if status == "passing"
            else ""
        )
        + "</li>"
    )


_TRUST_FLAGS = tuple(flag for _, flag in trust_card.FILTER_CHOICES)  # deterministic, reward_checked


def _trust_filters(query: catalog.ListQuery) -> str:
    """The *Trust* checkboxes: each keeps only the envs with that badge (`true`, as the API takes it)."""
    boxes = "".join(
        f'<label><input type="checkbox" name="{escape(flag)}" value="true" id="oe-trust-{escape(flag)}"'
        f"{' checked' if getattr(query, flag) is True else ''}>{escape(label)}</label>"
        for label, flag in trust_card.FILTER_CHOICES
    )
    return f'<fieldset id="oe-trust-filter"><legend>Trust</legend>{boxes}</fieldset>'


def _check_ids() -> list[str]:
    from openenv.validation.rfc008 import load_policy

    return list(load_policy().entries)


_CHECK_IDS = _check_ids()


def catalog_page(
    settings: HubSettings, factory: sessionmaker[Session], root: str, params: dict[str, str]
) -> tuple[int, str]:
    """(status, HTML) of the catalog, filtered by the query parameters q, tag, status, sort,
    check (an RFC 008 check id the env's report passed, or `ID:STATUS`) and the trust filters of
    the JSON API: deterministic, reward_checked (`true` or `false`) and min_sessions."""
    # q, tag and check are bounded by the listing's settings: past them, the 400 names the bound
    q = (params.get("q") or "").strip()
    tag = (params.get("tag") or "").strip()
    status = params.get("status") or ""
    sort = params.get("sort") or "name"
    check = (params.get("check") or "").strip()
    sessions = (params.get("min_sessions") or "").strip()[:20]
    query = catalog.ListQuery(
        q=q or None,
        tags=[tag] if tag else [],
        status=status or None,
        sort=sort,
        limit=settings.page_size,
        checks=[check] if check else [],
    )
    code, note = 200, ""
    try:
        for flag in _TRUST_FLAGS:
            setattr(query, flag, catalog.parse_flag(flag, params.get(flag)))
        if sessions:
            if not sessions.isdigit():
                raise InvalidRequest("min_sessions must be a whole number of sessions, 0 or more")
            query.min_sessions = int(sessions) or None
        query.check(settings)
        with factory() as db:
            envs, _, total = catalog.list_envs(db, query)
            items = [catalog.summary(e) for e in envs]
            tags = catalog.all_tags(db)
    except HubError as exc:
        code, note, items, total, tags = 400, views.message(exc.message, "error"), [], 0, []
    form = (
        f'<form class="oe-filters" method="get" action="{escape(_root(root))}" role="search">'
        f'<label class="oe-q">Search<input type="search" name="q" id="oe-search" value="{escape(q)}" '
        'placeholder="name, description or tag"></label>'
        f'<label>Tag<select name="tag" id="oe-tag"><option value="">any tag</option>{_options([(t, t) for t in tags], tag)}</select></label>'
        f'<label>Status<select name="status" id="oe-status">{_options(STATUSES, status)}</select></label>'
        f'<label>Sort by<select name="sort" id="oe-sort">{_options(views.SORTS, sort)}</select></label>'
        f'<label>Passed check<select name="check" id="oe-check"><option value="">any</option>'
        f"{_options([(c, c) for c in _CHECK_IDS], check)}</select></label>"
        f"{_trust_filters(query)}"
        f'<label>Holds at least N sessions<input type="number" name="min_sessions" id="oe-min-sessions" min="0" '
        f'step="1" value="{escape(sessions)}"></label>'
        "<button type=submit>Search</button></form>"
    )
    if items:
        shown = f"{len(items)} of {total}" if total > len(items) else str(total)
        results = (
            f'<div class="oe-count" id="oe-count">{shown} environment{"s" if total != 1 else ""}</div>'
            f'<ul class="oe-cards" id="oe-results">{"".join(_card(root, e) for e in items)}</ul>'
        )
    elif not note:
        results = views.message("No environment matches. Clear the filters or search for other words.")
    else:
        results = ""
    body = f"<h1>Environments</h1>{form}{note}{results}"
    description = "OpenEnv Hub: find RL environments that work, try them, and use them."
    return code, _document(root, "OpenEnv Hub: environments for agentic RL", description, settings.public_url, body)


def env_page(
    settings: HubSettings,
    factory: sessionmaker[Session],
    root: str,
    owner: str,
    name: str,
    seen_at: str | None = None,
) -> tuple[int, str]:
    """(status, HTML) of an env's page: what it is, its trust card, how to use it, and the play
    panel; `seen_at` is the address the visitor reached the Hub at (`hub_service.ui.site.hub_url`)."""
    from hub_service.ui.site import _Pages

    env_id = f"{owner}/{name}"
    try:
        page = _Pages(settings, factory).env_page(env_id, seen_at)
    except HubError as exc:
        return exc.status, not_found_page(settings, root, exc.message)
    home = _root(root)
    panel = escape(f"{home}?{urllib.parse.urlencode({'panel': 'play', 'env': env_id})}")
    description = page["description"] or f"{env_id}, an environment for agentic RL on the OpenEnv Hub."
    header = page["header"].replace('<h2 id="oe-env-title">', '<h1 id="oe-env-title">').replace("</h2>", "</h1>", 1)
    body = (
        f'<nav class="oe-jump" aria-label="On this page"><a href="{escape(home)}">← All environments</a>'
        '<a href="#play">Play</a><a href="#use">Use it</a><a href="#readme">README</a></nav>'
        f"{header}"
        '<section id="play" aria-label="Play and let a model try">'
        f'<iframe class="oe-panel" id="oe-panel" title="Play {escape(env_id)} or let a model try" src="{panel}"></iframe>'
        '<p><a href="' + panel + '">Open the play panel on its own page</a></p></section>'
        '<div class="oe-env-grid"><section id="readme" aria-label="README">' + page["readme"] + "</section>"
        f'<aside><h2>Trust signals</h2>{page["trust"]}<h2 id="use">How to use</h2>'
        f"<pre tabindex='0'><code>{escape(page['python'])}</code></pre><pre tabindex='0'><code>{escape(page['shell'])}</code></pre>"
        f"<h2>Leaderboard</h2>{env_board(factory, env_id)}</aside></div>"
    )
    url = settings.public_url.rstrip("/") + env_path("/", env_id)
    return 200, _document(root, f"{env_id} · OpenEnv Hub", description, url, body)


# A play panel that shows nothing this long after it started loading is loaded again, at most LOAD_TRIES times.
LOAD_WAIT_S = 20
LOAD_TRIES = 3

# Put first in the play panel's own page (`watch_panel_load`): the Gradio app adds its `head` only
# once its script runs, so a panel whose script or style was not fetched (or that draws nothing in
# LOAD_WAIT_S) is caught here, says so in words, and loads itself again, up to LOAD_TRIES times.
PANEL_LOAD_WATCH = (
    """<script>
(() => {
  const tries = Number(sessionStorage.getItem("oe-panel-tries") || 0), started = Date.now();
  let failed = false;
  const fail = (why) => {
    if (failed || document.getElementById("oe-play-reset")) return;
    failed = true;
    const again = tries < """
    + str(LOAD_TRIES)
    + """;
    const box = document.createElement("div");
    box.id = "oe-panel-failed"; box.setAttribute("role", "alert");
    box.style.cssText = "margin:12px;padding:8px 12px;border-radius:6px;background:#ffebe9;color:#a40e26;font:16px/1.5 system-ui,sans-serif";
    box.textContent = "The play panel did not load (" + why + "). " + (again ? "Trying again…" : "Reload the page to try again.");
    const put = () => document.body ? document.body.prepend(box) : setTimeout(put, 50);
    put();
    if (again) { sessionStorage.setItem("oe-panel-tries", String(tries + 1)); setTimeout(() => location.reload(), 1500); }
  };
  window.addEventListener("error", (event) => {
    const part = event.target;
    if (part instanceof HTMLScriptElement || part instanceof HTMLLinkElement) fail("a part of it could not be fetched");
  }, true);
  const watch = setInterval(() => {
    if (document.getElementById("oe-play-reset")) { clearInterval(watch); sessionStorage.removeItem("oe-panel-tries"); }
    else if (Date.now() - started > """
    + str(LOAD_WAIT_S * 1000)
    + """) { clearInterval(watch); fail("nothing was drawn in """
    + str(LOAD_WAIT_S)
    + """ s"); }
  }, 250);
})();
</script>"""
)


def watch_panel_load(send: Any) -> Any:
    """`send` for the play panel's page (Gradio's HTML), with PANEL_LOAD_WATCH put first in its <head>."""
    state: dict[str, Any] = {}

    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"content-length"]
            html = any(k.lower() == b"content-type" and v.startswith(b"text/html") for k, v in headers) and not any(
                k.lower() == b"content-encoding" for k, _ in headers
            )  # a compressed page passes as it is
            state["html"] = html
            state["start"] = {**message, "headers": headers}
            if not html:
                await send(message)
            return
        if message["type"] != "http.response.body" or not state.get("html"):
            await send(message)
            return
        state["body"] = state.get("body", b"") + message.get("body", b"")
        if message.get("more_body"):
            return
        body = state["body"].replace(b"<head>", b"<head>" + PANEL_LOAD_WATCH.encode(), 1)
        start = state["start"]
        await send({**start, "headers": [*start["headers"], (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return wrapped


def not_found_page(settings: HubSettings, root: str, text: str) -> str:
    body = f'<h1 id="oe-env-title">Not found</h1>{views.message(text, "error")}<p><a href="{escape(_root(root))}">All environments</a></p>'
    return _document(root, "Not found · OpenEnv Hub", text, settings.public_url, body, robots="noindex")
