"""The website's layout: a catalog tab and an environment tab (overview, checks, play, model try, leaderboard).

Env pages are addressed as `/?env=owner/name`: catalog cards are plain links, so pages can be
bookmarked and shared, and the browser's back button works. All queries go through
`hub_service.catalog.service`; all HTML comes from `views` (escaped) and `markdown` (sanitized).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import gradio as gr
from sqlalchemy.orm import Session, sessionmaker

from hub_service.audit.service import list_events
from hub_service.catalog import service as catalog
from hub_service.errors import HubError
from hub_service.health.service import env_health
from hub_service.play.sessions import PlayManager
from hub_service.settings import HubSettings
from hub_service.ui import trust_card, views
from hub_service.ui.discovery_view import discovery_lines
from hub_service.ui.leaderboard import LEADERBOARD_CSS, board_panel
from hub_service.ui.markdown import render_markdown, split_front_matter
from hub_service.ui.play_panel import PANEL_SCRIPT
from openenv.render import ANSI_CSS

__all__ = ["CSS", "HEAD", "build_site", "hub_url", "theme"]

STATUSES = [
    ("any status", ""),
    ("passing", "passing"),
    ("failing", "failing"),
    ("pending", "pending"),
    ("waiting for infrastructure", "waiting"),
]
HEAD = (
    '<meta name="description" content="OpenEnv Hub: find RL environments that work, try them, and use them.">'
    + """
<script>
// Framed in an env's page (/?panel=play): no site header, no catalog tab (CSS below, before first paint).
if (new URLSearchParams(location.search).get("panel") === "play") document.documentElement.classList.add("oe-framed");
</script>"""
    + PANEL_SCRIPT
)
CSS = (
    """
.oe-framed #oe-site-head, .oe-framed #oe-env-header, .oe-framed [role=tablist]:has(> button[data-tab-id="catalog"]) { display: none !important; }
.oe-cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 12px; }
.oe-card { display: block; border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 12px; text-decoration: none !important; color: inherit !important; background: var(--background-fill-primary); }
.oe-card:hover { border-color: var(--color-accent); }
.oe-card, .oe-card div { text-align: left; }
.oe-card-head { display: flex; justify-content: space-between; gap: 8px; align-items: center; }
.oe-card-desc { margin: 6px 0; color: var(--body-text-color-subdued); min-height: 1.2em; }
.oe-card-foot, .oe-count { font-size: .85em; color: var(--body-text-color-subdued); margin: 4px 0; }
.oe-tag { display: inline-block; font-size: .78em; padding: 1px 7px; margin: 2px 4px 2px 0; border-radius: 9px; background: var(--background-fill-secondary); }
.oe-pill { display: inline-block; font-size: .8em; padding: 1px 9px; margin-right: 6px; border-radius: 9px; border: 1px solid transparent; }
.oe-ok { background: #dafbe1; color: #1a7f37; } .oe-bad { background: #ffebe9; color: #cf222e; }
.oe-warn { background: #fff8c5; color: #9a6700; } .oe-none { background: #eaeef2; color: #57606a; }
.oe-msg { padding: 6px 10px; border-radius: 6px; margin: 4px 0; } .oe-msg.oe-error { background: #ffebe9; color: #cf222e; }
.oe-msg.oe-info { background: var(--background-fill-secondary); }
.oe-table, .oe-kv, .oe-grid { border-collapse: collapse; margin: 4px 0; }
.oe-table td, .oe-table th, .oe-kv td, .oe-kv th, .oe-grid td { border: 1px solid var(--border-color-primary); padding: 3px 7px; text-align: left; vertical-align: top; }
/* A table too wide for its place scrolls inside itself (Gradio's boxes would cut it off). */
.oe-table, .oe-readme table { display: block; max-width: 100%; overflow-x: auto; }
.oe-table code { white-space: pre-wrap; overflow-wrap: break-word; }
/* The actions this episode: fixed columns, so that a long action wraps in its own (a word longer
   than the column breaks where it must) instead of squeezing the others or the words in it. */
#oe-history { display: table; table-layout: fixed; width: 100%; font-size: .9em; }
#oe-history th:first-child { width: 2em; } #oe-history th:nth-child(3) { width: 5em; } #oe-history th:nth-child(4) { width: 4em; }
#oe-history code { overflow-wrap: anywhere; font-size: .9em; }
/* Keys break only where views.py allows (after "_"), never mid-word, and never run over their values. */
.oe-kv th { background: var(--background-fill-secondary); overflow-wrap: normal; word-break: normal; }
.oe-grid td { font-family: var(--font-mono); text-align: center; padding: 1px 5px; }
.oe-frame { image-rendering: pixelated; width: 320px; max-width: 100%; }
.oe-picture { margin: 4px 0 8px; max-width: 100%; overflow-x: auto; }
.oe-picture img.oe-frame { width: min(420px, 100%); height: auto; }
.oe-picture img.oe-frame[src^="data:image/svg"] { image-rendering: auto; }
.oe-picture pre.oe-frame, .oe-picture div.oe-frame { width: auto; font-size: .9em; }
.oe-choices { display: flex; flex-wrap: wrap; gap: 6px; margin: 6px 0; }
button.oe-act { min-width: 48px; padding: 6px 12px; border-radius: 6px; border: 1px solid var(--border-color-primary);
  background: var(--button-secondary-background-fill); color: var(--button-secondary-text-color); cursor: pointer; font: inherit; }
button.oe-act:hover:not(:disabled) { border-color: var(--color-accent); }
button.oe-act:disabled { opacity: .45; cursor: not-allowed; }
.oe-keys { font-size: .85em; color: var(--body-text-color); }
.oe-over { background: #fff8c5; color: #9a6700; font-weight: 600; }
.oe-obs, #oe-play-observation, #oe-play-status, #oe-play-error, #oe-try-trajectory { max-width: 100%; overflow-wrap: anywhere; }
.oe-obs pre, .oe-kv pre, #oe-trajectory pre { white-space: pre-wrap; overflow-wrap: anywhere; word-break: break-word; }
.oe-obs .oe-kv, #oe-trajectory .oe-kv { width: 100%; }
.oe-obs .oe-kv td, #oe-trajectory .oe-kv td { overflow-wrap: anywhere; word-break: break-word; }
.oe-obs .oe-grid { max-width: 100%; display: block; overflow-x: auto; }
.oe-figs { flex-wrap: wrap; }
.oe-figs { display: flex; gap: 18px; margin: 4px 0 8px; }
.oe-log pre, .oe-json, .oe-step pre { max-height: 420px; overflow: auto; white-space: pre-wrap; word-break: break-word; font-size: .82em; }
.oe-step { border-left: 3px solid #1a7f37; padding-left: 8px; margin: 6px 0; } .oe-step-bad { border-left-color: #cf222e; }
.oe-err { color: #cf222e; }
.oe-readme img { max-width: 100%; }
.oe-readme pre { overflow-x: auto; white-space: pre; }
"""
    + trust_card.CSS
    + LEADERBOARD_CSS
    + views.ACCESS_CSS
    + "\n"
    + ANSI_CSS
)


def theme() -> Any:
    # System fonts: the default theme would fetch web fonts from the internet on every page.
    # Text at a contrast of at least 4.5:1 (WCAG AA, checked by axe-core in
    # tests/hub/web/test_accessibility.py): the Soft theme's labels (3.6:1), help text (2.5:1) and
    # primary buttons and chosen options (3.0:1 and 4.5:1 less a hair) are darkened.
    return gr.themes.Soft(font=["system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"]).set(
        block_label_text_color="*primary_700",
        block_title_text_color="*primary_700",
        block_info_text_color="*neutral_600",
        body_text_color_subdued="*neutral_600",
        checkbox_label_background_fill_selected="*primary_700",
        button_primary_background_fill="*primary_700",
        button_primary_background_fill_hover="*primary_800",
        button_primary_text_color="white",
        button_primary_text_color_hover="white",
    )


def _split_id(env_id: str | None) -> tuple[str, str] | None:
    if not env_id or env_id.count("/") != 1:
        return None
    owner, name = env_id.split("/")
    return (owner, name) if owner and name else None


class _Pages:
    """Query helpers for the page handlers (each opens one short database session)."""

    def __init__(self, settings: HubSettings, factory: sessionmaker[Session]) -> None:
        self.settings = settings
        self.factory = factory

    def search(
        self,
        q: str,
        tags: list[str],
        status: str,
        sort: str,
        trust: list[str] | None = None,
        min_sessions: float | None = None,
        checks: list[str] | None = None,
    ) -> str:
        query = catalog.ListQuery(
            q=(q or "").strip() or None,  # bounded by ListQuery.check, which names the bound past it
            tags=list(tags or []),
            status=status or None,
            sort=sort or "name",
            limit=self.settings.page_size,
            **trust_card.query_options(trust, min_sessions, checks),
        )
        try:
            query.check(self.settings)
            with self.factory() as db:
                envs, _, total = catalog.list_envs(db, query)
                items = [catalog.summary(e) for e in envs]
        except HubError as exc:
            return views.message(exc.message, "error")
        return views.catalog_cards(items, total)

    def tags(self) -> list[str]:
        with self.factory() as db:
            return catalog.all_tags(db)

    def env_page(self, env_id: str, seen_at: str | None = None) -> dict[str, Any]:
        """Everything the env tab shows, as HTML fragments and text (`seen_at`: the address the
        visitor reached the Hub at, see `hub_url`)."""
        parts = _split_id(env_id)
        if parts is None:
            raise HubError(f"{env_id!r} is not an environment id: use owner/name")
        with self.factory() as db:
            env = catalog.get_env(db, *parts)
            versions = catalog.env_versions(db, env, limit=20)
            version = catalog.latest_of(env, versions)
            runs = catalog.stage_runs(db, version) if version else []
            summary = catalog.summary(env)
            health = env_health(db, *parts, limit=20)
            events, _ = list_events(db, env, limit=30)
            current = catalog.get_version(db, env, None) if env.latest_version_id is not None else None
            trust = trust_card.trust_view(
                current if current is not None and current.id == env.latest_version_id else None
            )
        front, body = split_front_matter(version.readme if version and version.readme else "")
        subtitle = " · ".join(p for p in (summary.title, summary.description) if p)
        header = (
            f'<h2 id="oe-env-title">{views.escape(summary.id)}</h2><div class="oe-card-desc">{views.escape(subtitle)}</div>'
            f"{views.badges(env, version)}{trust_card.badge_row(summary, checks=False)}{views.health_line(health)}{views.deprecation_note(env)}"
            f"{views.imported_line(version.manifest if version else None)}{discovery_lines(version)}"
        )
        history = "".join(
            f"<tr><td><code>{views.escape(v.sha[:12])}</code></td><td>{views.escape(v.ref)}</td>"
            f"<td>{views.escape(v.state)}{' · yanked: ' + views.escape(v.yank_reason or '') if v.yanked else ''}</td>"
            f"<td>{views.escape(str(v.created_at)[:19])}</td></tr>"
            for v in versions
        )
        return {
            "header": header,
            "description": subtitle,
            "trust": trust,
            "readme": f'<div class="oe-readme">{render_markdown(body, top=2) if body.strip() else views.message("This environment has no README.")}</div>',
            "manifest": json.dumps(
                version.manifest if version and version.manifest else front or {}, indent=2, default=str
            ),
            "figures": views.figures(version),
            "report": views.report_view(version.validation if version else None),
            "stages": views.stages_view(runs),
            "history": views.history_view(health, events),
            "versions": f'<table class="oe-table"><tr><th>revision</th><th>ref</th><th>state</th><th>indexed</th></tr>{history}</table>',
            "python": _python_usage(summary.id, hub_url(self.settings, seen_at), env.source, version),
            "shell": f"openenv fork {summary.id}      # your own copy, as a Space\nopenenv validate {summary.id}  # the checks, on your machine",
        }


def hub_url(settings: HubSettings, seen_at: str | None) -> str:
    """The Hub's address for a visitor to copy: `public_url` when the operator set it, else the
    address the visitor reached it at (the default, port 7860, is wrong wherever it serves elsewhere)."""
    if "public_url" in settings.model_fields_set or not seen_at:
        return settings.public_url.rstrip("/")
    return seen_at.rstrip("/")


def _python_usage(env_id: str, hub_url: str, source: str, version: Any | None) -> str:
    lines = [
        "from openenv import GenericEnvClient",
        "",
        f"# export OPENENV_HUB_URL={hub_url}   (the Hub tells the client where the env runs)",
        f'env = await GenericEnvClient.from_hub("{env_id}")',
        "result = await env.reset()",
        "print(result.observation)",
        "await env.close()",
        "",
        "# or blocking:",
        f'with GenericEnvClient.from_hub("{env_id}").sync() as env:',
        "    print(env.reset().observation)",
    ]
    if source == "local" and version is not None and version.image_ref:
        lines += [
            "",
            "# on this machine, from the image the Hub built:",
            f'env = await GenericEnvClient.from_docker_image("{version.image_ref}")',
        ]
    return "\n".join(lines)


def build_site(settings: HubSettings, factory: sessionmaker[Session], play: PlayManager) -> gr.Blocks:
    """The website's Blocks."""
    from hub_service.ui.play_panel import play_panel
    from hub_service.ui.try_panel import try_panel

    pages = _Pages(settings, factory)
    # Gradio caches files it serves or receives; none of them need to outlive an hour (by default).
    cache = (settings.web_cache_max_age_s, settings.web_cache_max_age_s)
    # What each panel fills when a page opens: run as the site's one load event (see below).
    on_load: list[tuple[Callable[[gr.Request], Any], Any]] = []
    with gr.Blocks(title="OpenEnv Hub", analytics_enabled=False, delete_cache=cache) as site:
        current = gr.State(None)
        site_head = gr.HTML(
            elem_id="oe-site-head",
            value='<div style="display:flex;gap:12px;align-items:baseline"><h1 style="margin:0"><a href="./" style="text-decoration:none">'
            "OpenEnv Hub</a></h1><span>Environments for agentic RL that pass their checks: browse them, play them, "
            'let a model try. JSON API at <a href="api/v1/envs">/api/v1</a>, reference at <a href="docs">/docs</a>.</span></div>',
        )
        with gr.Tabs(selected="catalog", overflow_behavior="wrap") as tabs:
            with gr.Tab("Catalog", id="catalog"):
                with gr.Row():
                    q = gr.Textbox(
                        label="Search",
                        placeholder="words in the name, description or tags",
                        elem_id="oe-search",
                        scale=3,
                    )
                    tags = gr.Dropdown(label="Tags", multiselect=True, choices=[], elem_id="oe-tags", scale=2)
                    status = gr.Dropdown(label="Status", choices=STATUSES, value="", elem_id="oe-status", scale=1)
                    sort = gr.Dropdown(
                        label="Sort by",
                        choices=[(label, value) for value, label in views.SORTS],
                        value="name",
                        elem_id="oe-sort",
                        scale=1,
                    )
                with gr.Row():
                    trust, min_sessions, checks = trust_card.filter_controls()
                results = gr.HTML(elem_id="oe-results")
            with gr.Tab("Environment", id="env"):
                header = gr.HTML(views.message("Choose an environment in the catalog."), elem_id="oe-env-header")
                with gr.Tabs(overflow_behavior="wrap", elem_id="oe-env-tabs") as env_tabs:
                    with gr.Tab("Overview", id="overview"), gr.Row():
                        with gr.Column(scale=3):
                            readme = gr.HTML(elem_id="oe-readme")
                        with gr.Column(scale=2):
                            gr.Markdown("**Trust signals** (measured by the smoke test)")
                            trust_card.trust_panel(on_load, factory)
                            gr.Markdown("**How to use**")
                            python = gr.Code(language="python", label="Python", elem_id="oe-usage-python")
                            shell = gr.Code(language="shell", label="Command line", elem_id="oe-usage-shell")
                            manifest = gr.Code(language="json", label="Manifest (openenv.yaml)", elem_id="oe-manifest")
                    with gr.Tab("Checks"):
                        figures = gr.HTML(elem_id="oe-figures-box")
                        gr.Markdown("**Validation report**")
                        report = gr.HTML(elem_id="oe-report-box")
                        gr.Markdown("**Build and smoke-test logs**")
                        stages = gr.HTML(elem_id="oe-stages-box")
                        gr.Markdown("**Revisions**")
                        revisions = gr.HTML()
                    with gr.Tab("History"):
                        history = gr.HTML(elem_id="oe-history-box")
                    with gr.Tab("Play", id="play"):
                        play_panel(settings, play, current)
                    with gr.Tab("Let a model try", id="try"):
                        tried = try_panel(settings, play, current)
                    with gr.Tab("Leaderboard", id="leaderboard"):
                        board_panel(on_load, factory, tried, current)

        page_outputs = [
            current,
            tabs,
            site_head,
            env_tabs,
            header,
            readme,
            python,
            shell,
            manifest,
            figures,
            report,
            stages,
            revisions,
            history,
        ]

        def open_page(request: gr.Request) -> list[Any]:
            query = dict(request.query_params) if request else {}
            env_id = query.get("env")
            # Framed in the env's server-rendered page: only the env's tabs, opened at Play.
            framed = query.get("panel") == "play" and bool(env_id)
            chrome = [gr.HTML(visible=False), gr.Tabs(selected="play")] if framed else [gr.skip()] * 2
            blank = [gr.skip()] * (len(page_outputs) - 4)
            if not env_id:
                return [None, gr.Tabs(selected="catalog"), *chrome, *blank]
            try:
                page = pages.env_page(env_id, str(request.base_url) if request else None)
            except HubError as exc:
                return [
                    None,
                    gr.Tabs(selected="env"),
                    *chrome,
                    views.message(exc.message, "error"),
                    *([gr.skip()] * (len(page_outputs) - 5)),
                ]
            return [
                env_id,
                gr.Tabs(selected="env"),
                *chrome,
                page["header"],
                page["readme"],
                page["python"],
                page["shell"],
                page["manifest"],
                page["figures"],
                page["report"],
                page["stages"],
                page["versions"],
                page["history"],
            ]

        filters = [q, tags, status, sort, trust, min_sessions, checks]

        def open_site(
            q_: str,
            tags_: list[str],
            status_: str,
            sort_: str,
            trust_: list[str] | None,
            min_sessions_: float | None,
            checks_: list[str] | None,
            request: gr.Request,
        ) -> list[Any]:
            return [
                *open_page(request),
                gr.Dropdown(choices=pages.tags()),
                pages.search(q_, tags_, status_, sort_, trust_, min_sessions_, checks_),
                *(fill(request) for fill, _ in on_load),
            ]

        # Everything a page shows when it opens comes from ONE event. Gradio's queue closes a visitor's
        # stream of results as soon as it has no event pending: with several events started at once,
        # the first to finish could close it before the others were queued, and their results never
        # arrived (a catalog left at "Loading...", seen in CI with six load events).
        site.load(open_site, inputs=filters, outputs=[*page_outputs, tags, results, *(box for _, box in on_load)])
        # One listener for every filter, answering in order: a visitor who unticks a box and clears
        # a field at once must see the list for both, never an older search's answer arriving last.
        # (Separate listeners run concurrently, and their answers land in whatever order they finish.)
        gr.on(
            triggers=[q.submit, q.change, *(box.change for box in (tags, status, sort, trust, min_sessions, checks))],
            fn=pages.search,
            inputs=filters,
            outputs=results,
            trigger_mode="always_last",
            show_progress="hidden",
        )

        async def leave(request: gr.Request) -> None:
            if request is not None and request.session_hash:
                await play.leave(request.session_hash)  # a play session outlives a reload (play_resume_grace_s)

        site.unload(leave)
    # Gradio runs one event at a time per handler by default: visitors would wait for each other.
    site.queue(default_concurrency_limit=max(4, settings.play_max_sessions))
    return site
