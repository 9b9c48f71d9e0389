"""The "Let a model try" tab: a policy plays N episodes while the trajectory streams in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import gradio as gr

from hub_service.errors import HubError
from hub_service.play.episodes import run_episodes
from hub_service.play.errors import PlayError, describe_env_failure
from hub_service.play.policies import LLMPolicy, Policy, RandomPolicy, check_public_endpoint
from hub_service.play.sessions import PlayManager, PlaySession
from hub_service.settings import HubSettings
from hub_service.ui import views
from hub_service.ui.leaderboard import store_try
from hub_service.ui.play_panel import _env_parts, parse_seed, visitor_of

__all__ = ["NO_ENDPOINT", "choose_endpoint", "models_can_try", "trusted_endpoints", "try_panel"]

BASELINE = "Random baseline (legal actions)"
LLM = "LLM (OpenAI-compatible endpoint)"


NO_ENDPOINT = (
    "this Hub's operator has set up no model endpoint, so only the random baseline can try here; "
    "to try your own model, run `openenv eval` on your machine"
)


def models_can_try(settings: HubSettings) -> bool:
    """Whether an LLM can be chosen at all: the operator listed an endpoint, or allows custom ones."""
    return bool(trusted_endpoints(settings)) or settings.llm_allow_custom_endpoint


def trusted_endpoints(settings: HubSettings) -> set[str]:
    """The base URLs the operator configured (no trailing slash): called without an address check."""
    listed = [settings.llm_base_url or "", *settings.llm_allowed_endpoints]
    return {u.strip().rstrip("/") for u in listed if u.strip()}


def choose_endpoint(settings: HubSettings, base_url: str, model: str, token: str) -> tuple[str, str, str | None]:
    """The endpoint, model and token to use: the form's, else the service's.

    The service's token goes only to the service's own endpoint: any other endpoint gets only the
    token typed with it. An endpoint the operator did not list is allowed only when custom
    endpoints are on (`check_public_endpoint` then vets its addresses).

    Raises:
        PlayError: no endpoint or model is known, or this endpoint is not allowed.
    """
    base_url, model, token = (base_url or "").strip().rstrip("/"), (model or "").strip(), (token or "").strip()
    own = (settings.llm_base_url or "").rstrip("/")
    if base_url and base_url != own:
        if base_url not in trusted_endpoints(settings):
            if not settings.llm_allow_custom_endpoint:
                listed = sorted(trusted_endpoints(settings))
                if not listed:
                    raise PlayError(NO_ENDPOINT)
                raise PlayError(
                    f"this Hub lets models try only through the endpoints its operator lists: {', '.join(listed)}"
                    + ("; or leave the base URL empty to use its own" if own else ""),
                    public_urls=listed,
                )
            if not base_url.startswith(("http://", "https://")):
                raise PlayError(
                    "the base URL must start with http:// or https:// (e.g. https://router.huggingface.co/v1)"
                )
        chosen_token = token or None
    else:
        if not own:
            listed = sorted(trusted_endpoints(settings))
            if listed:
                raise PlayError(
                    f"enter a base URL: one of those this Hub's operator lists ({', '.join(listed)})",
                    public_urls=listed,
                )
            if settings.llm_allow_custom_endpoint:
                raise PlayError(
                    "enter the base URL of an OpenAI-compatible endpoint (e.g. https://router.huggingface.co/v1)"
                )
            raise PlayError(NO_ENDPOINT)
        base_url = own
        chosen_token = token or (settings.llm_token.get_secret_value() if settings.llm_token else None)
    model = model or (settings.llm_model or "")
    if not model:
        raise PlayError("enter the model's name (e.g. meta-llama/Llama-3.1-8B-Instruct)")
    return base_url, model, chosen_token


def try_panel(settings: HubSettings, play: PlayManager, current: gr.State) -> Any:
    """Lay out the model-try tab inside the current Blocks context; returns the Run event (to chain on)."""
    default_model = settings.llm_model or ""
    with gr.Row():
        with gr.Column(scale=2):
            # Without an endpoint the LLM choice is not offered, and why is said once, here.
            offered = [BASELINE, LLM] if models_can_try(settings) else [BASELINE]
            policy = gr.Radio(offered, value=BASELINE, label="Policy", elem_id="oe-try-policy")
            if not models_can_try(settings):
                gr.HTML(views.message(NO_ENDPOINT[0].upper() + NO_ENDPOINT[1:] + "."), elem_id="oe-try-no-llm")
            with gr.Group(visible=False) as llm_box:
                base_url = gr.Textbox(
                    label="Base URL",
                    elem_id="oe-try-base-url",
                    placeholder=", ".join(sorted(trusted_endpoints(settings))) or "https://router.huggingface.co/v1",
                )
                model = gr.Textbox(label="Model", value=default_model, elem_id="oe-try-model")
                token = gr.Textbox(
                    label="Token",
                    type="password",
                    elem_id="oe-try-token",
                    placeholder="the Hub's own token is used with its own endpoint"
                    if settings.llm_token
                    else "optional",
                )
            with gr.Row():
                episodes = gr.Slider(
                    1, settings.try_max_episodes, value=1, step=1, label="Episodes", elem_id="oe-try-episodes"
                )
                max_steps = gr.Slider(
                    1,
                    settings.try_max_steps,
                    value=min(20, settings.try_max_steps),
                    step=1,
                    label="Steps per episode at most",
                    elem_id="oe-try-steps",
                )
            seed = gr.Textbox(label="Seed", placeholder="random", elem_id="oe-try-seed")
            run = gr.Button("Run", variant="primary", elem_id="oe-try-run")
        with gr.Column(scale=3):
            score = gr.HTML(views.try_summary(None), elem_id="oe-try-score")
            trajectory = gr.HTML(elem_id="oe-try-trajectory")

    policy.change(lambda p: gr.Group(visible=p == LLM), inputs=policy, outputs=llm_box, show_progress="hidden")

    async def do_run(
        env_id: str | None,
        kind: str,
        url: str,
        name: str,
        secret: str,
        n: float,
        steps: float,
        seed_text: str,
        request: gr.Request,
    ) -> AsyncIterator[list[str]]:
        tab = request.session_hash or "anonymous"
        events: list[dict[str, Any]] = []
        session: PlaySession | None = None
        # The outcome is shown only once the env's instance is closed: the Run button takes a new
        # click only when this event has ended, and a click while it was still closing was lost.
        outcome: list[str] | None = None
        try:
            owner, env_name = _env_parts(env_id)
            seed_value = parse_seed(seed_text)
            n_episodes = max(1, min(int(n), settings.try_max_episodes))
            n_steps = max(1, min(int(steps), settings.try_max_steps))
            yield [views.try_summary(None, f"starting {env_id}..."), ""]
            endpoint = await _endpoint(settings, kind, url, name, secret)  # refused before any env starts
            await play.check_rate("model", visitor_of(request))
            session = await play.open(tab, visitor_of(request), owner, env_name, kind="try")
            chosen = _policy(settings, session, endpoint, seed_value)
            async for event in run_episodes(
                session, chosen, episodes=n_episodes, max_steps=n_steps, seed=seed_value, render=True
            ):
                if event["type"] == "summary":
                    if (
                        endpoint is not None and not event["stopped"]
                    ):  # a model's finished try is an eval of it (ui/leaderboard.py)
                        await store_try(play.factory, session, endpoint[1], endpoint[0], events, event)
                    outcome = [views.try_summary(event), views.trajectory_view(events)]
                else:
                    _keep_recent_frames(events, event)
                    events.append(event)
                    yield [
                        views.try_summary(None, f"{chosen.name} is playing: episode {event['episode']}..."),
                        views.trajectory_view(events),
                    ]
        except HubError as exc:  # `message`: no env server's address
            outcome = [views.message(exc.message, "error"), views.trajectory_view(events)]
        except Exception as exc:  # the env or endpoint failed mid-run: say so, keep what was played
            from openenv.errors import OpenEnvError

            if not isinstance(exc, OpenEnvError):
                raise
            outcome = [
                views.message(f"the run stopped: {describe_env_failure(exc)}", "error"),
                views.trajectory_view(events),
            ]
        finally:
            if session is not None:
                await play.close(tab, "try")
        if outcome is not None:
            yield outcome

    return run.click(
        do_run,
        inputs=[current, policy, base_url, model, token, episodes, max_steps, seed],
        outputs=[score, trajectory],
        concurrency_limit=None,
    )


FRAMES_SHOWN = 12  # pictures kept in a trajectory: the latest steps' (each can weigh as much as a screen)


def _keep_recent_frames(events: list[dict[str, Any]], event: dict[str, Any]) -> None:
    """Turn the new event's frame into safe HTML once; drop the pictures of older steps."""
    frame = event.pop("frame", None)
    if frame is not None:
        alt = views.picture_words(event.get("observation"), frame, f"the env after step {event.get('step', 0)}")
        event["frame_html"] = views.frame_view(frame, alt=alt)
    with_frames = [e for e in events if e.get("frame_html")]
    for old in with_frames[: max(0, len(with_frames) - FRAMES_SHOWN + 1)]:
        old.pop("frame_html", None)


async def _endpoint(
    settings: HubSettings, kind: str, url: str, name: str, secret: str
) -> tuple[str, str, str | None, bool] | None:
    """(base URL, model, token, public only) for an LLM run, vetted; None for the baseline."""
    if kind != LLM:
        return None
    base_url, model, token = choose_endpoint(settings, url, name, secret)
    public_only = base_url not in trusted_endpoints(settings)
    if public_only:
        await check_public_endpoint(base_url)
    return base_url, model, token, public_only


def _policy(
    settings: HubSettings,
    session: PlaySession,
    endpoint: tuple[str, str, str | None, bool] | None,
    seed_value: int | None,
) -> Policy:
    if endpoint is None:
        return RandomPolicy(session.action_schema, seed=seed_value)
    base_url, model, token, public_only = endpoint
    return LLMPolicy(
        base_url=base_url,
        model=model,
        token=token,
        schema=session.action_schema,
        env_name=session.env_id,
        description=session.description,
        timeout_s=settings.llm_timeout_s,
        public_only=public_only,
    )
