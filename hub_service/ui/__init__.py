"""The Gradio part of the website, mounted at `/` behind the server-rendered pages of
hub_service/web: the play / model-try panel (`/?panel=play&env=owner/name`) and the whole Gradio
app (`/?panel=site`)."""

from __future__ import annotations

from typing import Any

__all__ = ["mount_website"]


def mount_website(app: Any) -> Any:
    """Mount the website on the service `app` (after its API routes, which keep precedence).

    Creates the app's `PlayManager` (`app.state.play`), whose sessions the lifespan closes, and
    guards the website's routes (`WebsiteGuard`: a rate limit per visitor, no uploads).
    """
    import gradio as gr

    from hub_service.play.sessions import PlayManager
    from hub_service.ui.guard import WebsiteGuard
    from hub_service.ui.site import CSS, HEAD, build_site, theme

    settings = app.state.settings
    play = PlayManager(settings, app.state.sessionmaker, getattr(app.state, "limiter", None))
    app.state.play = play
    blocks = build_site(settings, app.state.sessionmaker, play)
    # Its "web" category is shared by every process; `blocks` tells it what Gradio's routes accept.
    app.add_middleware(WebsiteGuard, limiter=app.state.limiter, blocks=blocks)
    return gr.mount_gradio_app(
        app, blocks, path="", theme=theme(), css=CSS, head=HEAD, footer_links=[], ssr_mode=False, show_error=True
    )
