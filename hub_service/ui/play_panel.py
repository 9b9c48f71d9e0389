"""The "Play" tab: a private session for this browser tab; the env's picture, one button per legal
action (keys for directions) or a form for free-form actions; reset/step, history."""

from __future__ import annotations

import json
import logging
from typing import Any

import gradio as gr

from hub_service.errors import HubError
from hub_service.play.errors import PlayError, describe_env_failure
from hub_service.play.sessions import PlayManager, PlaySession
from hub_service.settings import HubSettings
from hub_service.ui import views
from hub_service.ui.forms import FieldSpec, FormError, collect, field_specs, form_values

log = logging.getLogger("hub_service.ui")
__all__ = ["options_hint", "parse_options", "parse_seed", "play_panel", "visitor_of"]


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
    if not text.isascii() or not text.isdigit() or len(text) > 19 or int(text) > MAX_SEED:
        shown = text if len(text) <= 40 else text[:40] + "…"
        raise PlayError(
            f"the seed must be a whole number from 0 to {MAX_SEED} (or empty for a random episode), not {shown!r}"
        )
    return int(text)


# Seeds and numbers in options go to env code that may hold them in 64-bit integers (NumPy's, say):
# larger ones are refused here with a message, not by the env with a framework's error.
MAX_SEED = 2**63 - 1
MAX_OPTION_INT = 2**53  # exact in every JSON reader (JavaScript's too)


def _out_of_range(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) > MAX_OPTION_INT
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, list):
        return any(_out_of_range(v) for v in value)
    if isinstance(value, dict):
        return any(_out_of_range(v) for v in value.values())
    return False


def _env_parts(env_id: str | None) -> tuple[str, str]:
    if not env_id or env_id.count("/") != 1:
        raise HubError("open an environment from the catalog first")
    owner, name = env_id.split("/")
    return owner, name


def _component(spec: FieldSpec, interactive: bool = True) -> Any:
    label = spec.name + (" *" if spec.required else "")
    elem_id = f"oe-field-{spec.name}"
    if spec.kind == "enum":
        choices = [(v if isinstance(v, str) else json.dumps(v), i) for i, v in enumerate(spec.choices)]
        return gr.Dropdown(
            choices=choices, value=spec.initial(), label=label, info=spec.help, interactive=interactive, elem_id=elem_id
        )
    if spec.kind == "boolean":
        return gr.Checkbox(value=spec.initial(), label=label, info=spec.help, interactive=interactive, elem_id=elem_id)
    if spec.kind in ("integer", "number"):
        return gr.Number(
            value=spec.initial(),
            label=label,
            info=spec.help,
            precision=0 if spec.kind == "integer" else None,
            minimum=spec.schema.get("minimum"),
            maximum=spec.schema.get("maximum"),
            interactive=interactive,
            elem_id=elem_id,
        )
    if spec.kind == "string":
        long = spec.schema.get("maxLength") is None or spec.schema["maxLength"] > 200
        return gr.Textbox(
            value=spec.initial(),
            label=label,
            info=spec.help,
            lines=2 if long else 1,
            interactive=interactive,
            elem_id=elem_id,
        )
    if spec.kind == "const":
        return gr.Textbox(value=json.dumps(spec.schema["const"]), label=label, interactive=False, elem_id=elem_id)
    return gr.Code(
        value=spec.initial(), language="json", label=f"{label} (JSON)", interactive=interactive, elem_id=elem_id
    )


def parse_options(text: str | None) -> dict[str, Any] | None:
    """Episode options typed in a form: empty, or a JSON object of the env's own reset arguments.

    Raises:
        PlayError: it is not a JSON object.
    """
    text = (text or "").strip()
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or any(k in ("seed", "episode_id") for k in value):
        raise PlayError(
            'the episode options must be a JSON object of the env\'s own reset arguments, like {"name": value} '
            "(the seed has a box of its own); its README lists them"
        )
    if _out_of_range(value):
        raise PlayError(
            f"numbers in the episode options must be finite and between -{MAX_OPTION_INT} and {MAX_OPTION_INT}"
        )
    return value


OPTIONS_PLACEHOLDER = "the env's own reset arguments as a JSON object (see its README)"


def options_hint(reset_options: dict[str, Any] | None) -> str:
    """The options box's placeholder once the env's server has said what its reset takes (its /schema
    `reset_options`): this env's own options with their defaults, not another env's example."""
    if not isinstance(reset_options, dict):
        return OPTIONS_PLACEHOLDER  # an env server that does not say (upstream's, say)
    known = reset_options.get("properties")
    known = known if isinstance(known, dict) else {}
    if not known:
        if reset_options.get("additionalProperties"):
            return "its reset takes any keyword arguments: a JSON object (see its README)"
        return "this env takes no episode options: leave this empty"
    defaults = {k: v["default"] for k, v in known.items() if isinstance(v, dict) and v.get("default") is not None}
    others = [k for k in known if k not in defaults]
    parts = [f"its options, with their defaults: {json.dumps(defaults)}"] if defaults else []
    if others:
        parts.append(("also: " if defaults else "its options: ") + ", ".join(others))
    return "; ".join(parts)


def _key_class(key: str) -> str:
    return "oe-key-" + ("Space" if key == " " else key)


_KEY_NAMES = {"ArrowUp": "↑", "ArrowDown": "↓", "ArrowLeft": "←", "ArrowRight": "→", " ": "space"}


def _board(session: PlaySession, old: Any = None) -> dict[str, Any]:
    """What the controls are drawn from: one choice per legal action (None: free-form), done, and a
    serial that changes with the choices (a click on a button of an older board is ignored)."""
    from openenv.render import action_choices

    choices = action_choices(session.action_schema, session.last)
    listed = [{"label": c.label, "action": c.action, "key": c.key} for c in choices] if choices is not None else None
    old = old if isinstance(old, dict) else {}
    if session.done and listed == [] and old.get("choices"):
        listed = old["choices"]  # nothing is legal once it is over: the last buttons stay, turned off
    serial = int(old.get("serial", 0)) + 1
    return {"choices": listed, "done": session.done, "serial": serial}


def choices_html(board: dict[str, Any] | None) -> str:
    """One button per legal action (off once the episode is over), and the keys that press them.

    The buttons are plain HTML: a click sets `#oe-play-pick` to "serial:index" and presses the
    hidden `#oe-play-go` (see HEAD in site.py), so one server handler serves every board."""
    if not board or not board.get("choices"):
        return ""
    done = bool(board.get("done"))
    buttons = []
    for i, choice in enumerate(board["choices"]):
        key = choice.get("key")
        cls = "oe-act" + (f" {_key_class(key)}" if key else "")
        hint = f' title="key: {views.escape(_KEY_NAMES.get(key, key))}"' if key else ""
        buttons.append(
            f'<button type="button" class="{views.escape(cls)}" data-choice="{board["serial"]}:{i}"{hint}'
            f"{' disabled' if done else ''}>{views.escape(choice['label'])}</button>"
        )
    keys = [f"{_KEY_NAMES.get(c['key'], c['key'])} {c['label']}" for c in board["choices"] if c.get("key")]
    line = f'<div class="oe-keys" id="oe-play-keys">Keys: {views.escape(" · ".join(keys))}</div>' if keys else ""
    return f'<div class="oe-choices" id="oe-play-choices">{"".join(buttons)}</div>{line}'


def _form_of(session: PlaySession, board: dict[str, Any]) -> dict[str, Any] | None:
    """What the action form is drawn from (None: no form, the action space is finite)."""
    if board["choices"] is not None:
        return None
    return {"schema": session.action_schema, "done": board["done"]}


async def _picture(session: PlaySession) -> str:
    """The env's picture now, sanitized ("" when it draws none)."""
    from openenv.errors import EnvServerError

    try:
        frame = await session.render()
    except EnvServerError as exc:  # the env failed to draw: the rest of the page still works
        return views.message(f"the env could not draw its picture: {describe_env_failure(exc)}")
    payload = session.last if isinstance(session.last, dict) else {}
    otherwise = f"the env's picture after {len(session.history)} steps (its observation is beside it)"
    return views.frame_view(frame, alt=views.picture_words(payload.get("observation"), frame, otherwise))


async def _shown(session: PlaySession, old_board: Any = None, old_form: Any = None) -> list[Any]:
    """The outputs (see `play_panel`) after a reset or a step."""
    board = _board(session, old_board)
    form = _form_of(session, board)
    steps, ret = len(session.history), session.episode_return
    # The form is drawn again only when it changes (a reset, the episode's end): what was typed stays.
    return [
        board,
        gr.skip() if form == old_form else form,
        "",
        views.play_figures(session.last, steps, ret),
        await _picture(session),
        choices_html(board),
        views.observation_view(session.last, steps, ret, figures=False),
        views.history_table(session.history),
    ]


def _unchanged(error: str) -> list[Any]:
    return [gr.skip(), gr.skip(), views.message(error, "error"), *([gr.skip()] * 5)]


# After a reset or a step (in the browser, no call to the Hub): when the env's picture or the Step
# button under it is not all on the screen (a phone, where the seed and options boxes stack above
# it), the picture is scrolled to the top, with the actions under it; a picture already in view with
# its Step button is left where it is. Measured on the screen of the page around the panel too (the
# env page frames it).
PICTURE_IN_VIEW = """() => {
  const picture = document.getElementById("oe-play-frame");
  if (!picture) return;
  const step = document.getElementById("oe-play-step");
  let shift = 0, view = window;
  try {
    if (window.frameElement) { shift = window.frameElement.getBoundingClientRect().top; view = window.parent; }
  } catch (e) {}
  const top = picture.getBoundingClientRect().top + shift;
  const bottom = Math.max(picture.getBoundingClientRect().bottom, step ? step.getBoundingClientRect().bottom : 0) + shift;
  if (top < -2 || bottom > view.innerHeight + 2) picture.scrollIntoView({block: "start"});
}"""


def play_panel(settings: HubSettings, play: PlayManager, current: gr.State) -> None:
    """Lay out the Play tab inside the current Blocks context."""
    from openenv.errors import EnvServerError, OpenEnvError

    board_state = gr.State(None)
    form_state = gr.State(None)
    gr.Markdown(
        "A session of your own on this environment: nobody else sees or changes it. It ends when you close "
        "the tab or leave it unused for a while."
    )
    with gr.Row(equal_height=False):
        seed = gr.Textbox(label="Seed", placeholder="random", elem_id="oe-play-seed", scale=1, min_width=110)
        options = gr.Textbox(
            label="Episode options (JSON)",
            placeholder=OPTIONS_PLACEHOLDER,
            elem_id="oe-play-options",
            scale=2,
            min_width=180,
        )
        reset = gr.Button("Reset: new episode", variant="primary", elem_id="oe-play-reset", scale=1, min_width=140)
    error = gr.HTML(elem_id="oe-play-error")
    with gr.Row():
        with gr.Column(scale=3, min_width=300):
            status = gr.HTML(elem_id="oe-play-status")
            picture = gr.HTML(elem_id="oe-play-frame")
            choices = gr.HTML(elem_id="oe-play-buttons")
            pick = gr.Textbox(visible="hidden", elem_id="oe-play-pick", label="choice")
            go = gr.Button("Play the choice", visible="hidden", elem_id="oe-play-go")
            form_slot = gr.Column()
        with gr.Column(scale=2, min_width=300):
            observation = gr.HTML(views.observation_view(None), elem_id="oe-play-observation")
            gr.Markdown("**Actions this episode**")
            history = gr.HTML(views.history_table([]), elem_id="oe-play-history")
            end = gr.Button("End my session", size="sm", elem_id="oe-play-end")
    shown = [board_state, form_state, error, status, picture, choices, observation, history]

    async def do_reset(
        env_id: str | None, seed_text: str, options_text: str, old_form: Any, request: gr.Request
    ) -> list[Any]:
        tab = request.session_hash or "anonymous"
        hint: Any = gr.skip()  # the options box as it was, until this env's server has said what it takes
        try:
            owner, name = _env_parts(env_id)
            seed_value = parse_seed(seed_text)
            extra = parse_options(options_text)
            # A sleeping Space is woken first: the visitor is told it is waited for, and its stages.
            session = await play.open(tab, visitor_of(request), owner, name, kind="play", on_wait=gr.Info)
            hint = gr.Textbox(placeholder=options_hint(session.reset_options))
            session.check_options(extra)
            await session.reset(seed=seed_value, options=extra)
        except HubError as exc:  # the env's server did not start, say: `message` is said without its address
            return [*_unchanged(exc.message), hint]
        except EnvServerError as exc:  # the env refused the reset (its options, say): its session goes on
            return [*_unchanged(describe_env_failure(exc)), hint]
        except OpenEnvError as exc:
            await play.close(tab, "play")
            failed = views.message(describe_env_failure(exc), "error")
            return [None, None, failed, "", "", "", gr.skip(), gr.skip(), gr.skip()]
        except Exception:  # a fault of the Hub's own: logged in full, told plainly, the session kept
            log.exception("play reset on %s failed", env_id)
            return [
                *_unchanged("the Hub could not start this episode (its own fault, logged); press Reset again"),
                hint,
            ]
        return [*await _shown(session, None, old_form), hint]

    # The options box learns this env's own options (and their defaults) from its first session.
    reset.click(do_reset, inputs=[current, seed, options, form_state], outputs=[*shown, options]).then(
        None, js=PICTURE_IN_VIEW
    )

    async def do_end(request: gr.Request) -> list[Any]:
        closed = await play.close(request.session_hash or "anonymous", "play")
        note = "Your session has ended." if closed else "You have no session open."
        return [None, None, views.message(note), "", "", "", views.observation_view(None), views.history_table([])]

    end.click(do_end, inputs=None, outputs=shown)

    async def step_with(action: dict[str, Any], old_board: Any, old_form: Any, request: gr.Request) -> list[Any]:
        session = play.get(request.session_hash or "anonymous", "play")
        if session is None:
            return _unchanged("Your session has ended (closed or unused too long): press Reset for a new one.")
        if session.done:
            return _unchanged("episode over — reset to play again")
        try:
            await session.step(action)
        except OpenEnvError as exc:  # refused or failed in the env, or the connection: said plainly
            return _unchanged(describe_env_failure(exc))
        return await _shown(session, old_board, old_form)

    async def do_choice(picked: str, old_board: Any, old_form: Any, request: gr.Request) -> list[Any]:
        serial, _, index = (picked or "").partition(":")
        if not isinstance(old_board, dict) or not old_board.get("choices") or serial != str(old_board.get("serial")):
            return [gr.skip()] * len(shown)  # a button of a board already replaced: nothing to do
        try:
            action = old_board["choices"][int(index)]["action"]
        except (ValueError, IndexError):
            return [gr.skip()] * len(shown)
        return await step_with(action, old_board, old_form, request)

    go.click(do_choice, inputs=[pick, board_state, form_state], outputs=shown, trigger_mode="once").then(
        None, js=PICTURE_IN_VIEW
    )

    with form_slot:
        # Drawn when an episode's form arrives, not also when the page loads (there is none then): one
        # event fewer at the page's start (site.py says why that matters).
        @gr.render(inputs=[form_state], triggers=[form_state.change])
        def action_form(form: dict[str, Any] | None) -> None:
            if form:
                _action_form(form["schema"], bool(form["done"]), board_state, form_state, step_with, shown)


# Said above the form while the JSON editor holds the action (see `_action_form`).
FORM_OFF = (
    "The form is off while “Edit the action as JSON” is ticked: the JSON below is the action that "
    "Step plays. Untick the box to use the form again (it is filled from the JSON)."
)


def _action_form(
    schema: dict[str, Any], done: bool, board_state: gr.State, form_state: gr.State, step_with: Any, shown: list[Any]
) -> None:
    """The form for a free-form action (one input per field, or JSON). One of the two is the action:
    while the JSON is (its box ticked), the form is turned off and says so, so that nothing typed
    in it is dropped unseen."""
    specs = field_specs(schema)
    simple = all(s.kind != "json" for s in specs)
    form_off = gr.HTML(views.message(FORM_OFF), visible=not simple, elem_id="oe-play-form-off")
    inputs = [_component(s, interactive=simple) for s in specs]
    as_json = gr.Checkbox(label="Edit the action as JSON", value=not simple, elem_id="oe-play-json-mode")
    example = collect(specs, [s.initial() for s in specs]) if specs else {}
    json_box = gr.Code(
        value=json.dumps(example, indent=2),
        language="json",
        label="Action (JSON)",
        visible=not simple,
        interactive=True,
        elem_id="oe-play-json",
    )

    def switch(data: dict[Any, Any]) -> dict[Any, Any]:
        """The form and the JSON show the same action: ticking the box writes the form's action as
        JSON; unticking it fills the form from the JSON, or keeps the JSON (and says why) when
        the form cannot show it."""
        current = [data[c] for c in inputs]
        form_off_now = {form_off: gr.HTML(visible=True), **{c: gr.update(interactive=False) for c in inputs}}
        if data[as_json]:
            try:
                text = json.dumps(collect(specs, current), indent=2)
            except FormError as exc:  # a half-filled form: the JSON keeps what it had
                gr.Warning(f"the form's action is not complete ({exc}); the JSON shows the last one")
                return {json_box: gr.Code(visible=True), **form_off_now}
            return {json_box: gr.Code(value=text, visible=True), **form_off_now}
        try:
            values = form_values(specs, json.loads(data[json_box] or "{}"), current)
        except ValueError as exc:  # FormError, or JSON that does not parse
            gr.Warning(f"the JSON cannot fill the form ({exc}); it stays open: fix it, or step with it")
            return {as_json: gr.Checkbox(value=True), json_box: gr.Code(visible=True), **form_off_now}
        form_on = {
            c: gr.update(value=v, interactive=spec.kind != "const")
            for c, v, spec in zip(inputs, values, specs, strict=True)
        }
        return {json_box: gr.Code(visible=False), form_off: gr.HTML(visible=False), **form_on}

    # `.input`, not `.change`: switching back on after a refusal must not write over the JSON kept.
    as_json.input(
        switch,
        inputs={as_json, json_box, *inputs},
        outputs=[as_json, json_box, form_off, *inputs],
        show_progress="hidden",
    )
    step = gr.Button("Step", variant="primary", elem_id="oe-play-step", interactive=not done)

    async def do_step(data: dict[Any, Any], request: gr.Request) -> list[Any]:
        try:
            if data[as_json]:
                action = json.loads(data[json_box] or "{}")
                if not isinstance(action, dict):
                    raise FormError("the action must be a JSON object")
            else:
                action = collect(specs, [data[c] for c in inputs])
        except (FormError, ValueError) as exc:
            return _unchanged(str(exc))
        return await step_with(action, data[board_state], data[form_state], request)

    step.click(do_step, inputs={board_state, form_state, as_json, json_box, *inputs}, outputs=shown).then(
        None, js=PICTURE_IN_VIEW
    )
