"""The "Play" tab: a private session for this browser tab, an action form, reset/step, history."""

from __future__ import annotations

import json
from typing import Any

import gradio as gr

from hub_service.errors import HubError
from hub_service.play.errors import PlayError
from hub_service.play.sessions import PlayManager
from hub_service.settings import HubSettings
from hub_service.ui import views
from hub_service.ui.forms import FieldSpec, FormError, collect, field_specs

__all__ = ["parse_seed", "play_panel", "visitor_of"]


def visitor_of(request: gr.Request | None) -> str:
    """Who a request comes from, for the per-visitor caps and rate limits (`visitor_key`)."""
    from hub_service.ui.guard import visitor_key

    client = getattr(request, "client", None)
    return visitor_key(getattr(client, "host", None))


def parse_seed(text: str | None) -> int | None:
    """A seed typed in a form: empty for a random episode, else a whole number >= 0.

    Raises:
        PlayError: it is not a whole number >= 0.
    """
    text = (text or "").strip()
    if not text:
        return None
    if not text.isdigit():
        raise PlayError(f"the seed must be a whole number >= 0 (or empty for a random episode), not {text!r}")
    return int(text)


def _env_parts(env_id: str | None) -> tuple[str, str]:
    if not env_id or env_id.count("/") != 1:
        raise HubError("open an environment from the catalog first")
    owner, name = env_id.split("/")
    return owner, name


def _component(spec: FieldSpec) -> Any:
    label = spec.name + (" *" if spec.required else "")
    elem_id = f"oe-field-{spec.name}"
    if spec.kind == "enum":
        choices = [(v if isinstance(v, str) else json.dumps(v), i) for i, v in enumerate(spec.choices)]
        return gr.Dropdown(choices=choices, value=spec.initial(), label=label, info=spec.help, elem_id=elem_id)
    if spec.kind == "boolean":
        return gr.Checkbox(value=spec.initial(), label=label, info=spec.help, elem_id=elem_id)
    if spec.kind in ("integer", "number"):
        return gr.Number(value=spec.initial(), label=label, info=spec.help, precision=0 if spec.kind == "integer" else None,
                         minimum=spec.schema.get("minimum"), maximum=spec.schema.get("maximum"), elem_id=elem_id)
    if spec.kind == "string":
        long = spec.schema.get("maxLength") is None or spec.schema["maxLength"] > 200
        return gr.Textbox(value=spec.initial(), label=label, info=spec.help, lines=2 if long else 1, elem_id=elem_id)
    if spec.kind == "const":
        return gr.Textbox(value=json.dumps(spec.schema["const"]), label=label, interactive=False, elem_id=elem_id)
    return gr.Code(value=spec.initial(), language="json", label=f"{label} (JSON)", elem_id=elem_id)


def play_panel(settings: HubSettings, play: PlayManager, current: gr.State) -> None:
    """Lay out the Play tab inside the current Blocks context."""
    from openenv.errors import OpenEnvError

    schema_state = gr.State(None)
    gr.Markdown("A session of your own on this environment: nobody else sees or changes it. It ends when you close "
                "the tab or leave it unused for a while.")
    with gr.Row():
        with gr.Column(scale=2):
            with gr.Row():
                seed = gr.Textbox(label="Seed", placeholder="random", elem_id="oe-play-seed", scale=1)
                reset = gr.Button("Reset: new episode", variant="primary", elem_id="oe-play-reset", scale=1)
            error = gr.HTML(elem_id="oe-play-error")
            form_slot = gr.Column()
            end = gr.Button("End my session", size="sm", elem_id="oe-play-end")
        with gr.Column(scale=3):
            observation = gr.HTML(views.observation_view(None), elem_id="oe-play-observation")
            gr.Markdown("**Actions this episode**")
            history = gr.HTML(views.history_table([]), elem_id="oe-play-history")

    async def do_reset(env_id: str | None, seed_text: str, request: gr.Request) -> list[Any]:
        try:
            owner, name = _env_parts(env_id)
            seed_value = parse_seed(seed_text)
            session = await play.open(request.session_hash or "anonymous", visitor_of(request), owner, name, kind="play")
            payload = await session.reset(seed=seed_value)
        except HubError as exc:
            return [gr.skip(), views.message(exc.message, "error"), gr.skip(), gr.skip()]
        except OpenEnvError as exc:
            await play.close(request.session_hash or "anonymous", "play")
            return [None, views.message(f"the env failed: {exc}; press Reset to start a new session", "error"), gr.skip(), gr.skip()]
        return [session.action_schema, "", views.observation_view(payload, 0, 0.0), views.history_table([])]

    reset.click(do_reset, inputs=[current, seed], outputs=[schema_state, error, observation, history])

    async def do_end(request: gr.Request) -> list[Any]:
        closed = await play.close(request.session_hash or "anonymous", "play")
        note = "Your session has ended." if closed else "You have no session open."
        return [None, views.message(note), views.observation_view(None), views.history_table([])]

    end.click(do_end, inputs=None, outputs=[schema_state, error, observation, history])

    with form_slot:
        @gr.render(inputs=[schema_state])
        def action_form(schema: dict[str, Any] | None) -> None:
            if not schema:
                gr.Markdown("Press **Reset** to start your session; the action form appears here.", elem_id="oe-play-hint")
                return
            specs = field_specs(schema)
            simple = all(s.kind != "json" for s in specs)
            inputs = [_component(s) for s in specs]
            as_json = gr.Checkbox(label="Edit the action as JSON", value=not simple, elem_id="oe-play-json-mode")
            example = collect(specs, [s.initial() for s in specs]) if specs else {}
            json_box = gr.Code(value=json.dumps(example, indent=2), language="json", label="Action (JSON)",
                               visible=not simple, elem_id="oe-play-json")
            as_json.change(lambda on: gr.Code(visible=on), inputs=as_json, outputs=json_box, show_progress="hidden")
            step = gr.Button("Step", variant="primary", elem_id="oe-play-step")

            async def do_step(data: dict[Any, Any], request: gr.Request) -> list[Any]:
                from openenv.errors import InvalidActionError

                tab = request.session_hash or "anonymous"
                session = play.get(tab, "play")
                if session is None:
                    return [views.message("Your session has ended (closed or unused too long): press Reset for a new one.", "error"),
                            gr.skip(), gr.skip()]
                try:
                    if data[as_json]:
                        action = json.loads(data[json_box] or "{}")
                        if not isinstance(action, dict):
                            raise FormError("the action must be a JSON object")
                    else:
                        action = collect(specs, [data[c] for c in inputs])
                    payload = await session.step(action)
                except (FormError, ValueError) as exc:
                    return [views.message(str(exc), "error"), gr.skip(), gr.skip()]
                except InvalidActionError as exc:
                    return [views.message(f"the env refused this action: {exc}", "error"), gr.skip(), gr.skip()]
                except OpenEnvError as exc:
                    return [views.message(f"the env failed: {exc}", "error"), gr.skip(), gr.skip()]
                return ["", views.observation_view(payload, len(session.history), session.episode_return), views.history_table(session.history)]

            step.click(do_step, inputs={current, as_json, json_box, *inputs}, outputs=[error, observation, history])
