"""The "Play" tab: a private session for this browser tab; the env's picture, one button per legal
action (keys for directions) or a form for free-form actions; reset/step, history."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import gradio as gr

from hub_service.errors import HubError
from hub_service.play.errors import PlayError, describe_env_failure, without_addresses
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


async def _shown(session: PlaySession, old_board: Any = None, old_form: Any = None, before: Any = None) -> list[Any]:
    """The outputs (see `play_panel`) after a reset or a step (`before`: what the step started
    from, `_seen`, to tell the visitor when it changed nothing)."""
    board = _board(session, old_board)
    form = _form_of(session, board)
    steps, ret = len(session.history), session.episode_return
    drawn = await _picture(session)
    notice = ""
    if before is not None and before == _seen(session, drawn) and not session.done:
        move = _move_words(session.history[-1]["action"] if session.history else None, old_board)
        notice = views.message(
            f"{move} changed nothing: the env's picture and observation are as they were "
            "(a wall, say, or a move that has no effect here). Try another move."
        )
    session.shown_picture = drawn
    # The form is drawn again only when it changes (a reset, the episode's end): what was typed stays.
    return [
        board,
        gr.skip() if form == old_form else form,
        "",
        views.play_figures(session.last, steps, ret)
        + f'<span hidden id="oe-play-idle" data-idle-s="{session.idle_timeout_s:g}"></span>',
        drawn,
        choices_html(board),
        views.observation_view(session.last, steps, ret, figures=False),
        views.history_table(session.history),
        notice,
    ]


# Keys of an observation that count time, not the state a move changes (steps left, a frame number).
_COUNTERS = ("step", "frame", "tick", "time", "turn")
_DIGITS = re.compile(r"\d+")


def _seen(session: PlaySession, picture: str) -> tuple[str, str]:
    """What a visitor sees of the env: its picture and its observation, counters left out (the
    numbers in the picture, "echo #3"; the observation's steps, frames, time)."""
    obs = (session.last or {}).get("observation")
    if isinstance(obs, dict):
        obs = {k: v for k, v in obs.items() if not any(word in k.lower() for word in _COUNTERS)}
    return _DIGITS.sub("", picture), json.dumps(obs, sort_keys=True, default=str)


def _move_words(action: Any, board: Any) -> str:
    """A step's action as the visitor chose it: its button's label, else "This action"."""
    if isinstance(board, dict):
        for choice in board.get("choices") or []:
            if choice.get("action") == action:
                return f"“{choice['label']}”"
    return "This action"


EXPIRED = "Your session ended (closed, or unused too long), so this move was not played."


def _expired(old_board: Any) -> list[Any]:
    """The outputs when the session is gone: the controls turned off, and one click starts a new
    episode (the restart button presses Reset, see PANEL_SCRIPT)."""
    board = dict(old_board, done=True) if isinstance(old_board, dict) and old_board.get("choices") else gr.skip()
    notice = (
        f'<div class="oe-msg oe-error" id="oe-play-expired">{views.escape(EXPIRED)} '
        '<button type="button" class="oe-restart" id="oe-play-restart">Start a new episode</button></div>'
    )
    return [
        board,
        gr.skip(),
        "",
        gr.skip(),
        gr.skip(),
        choices_html(board) if isinstance(board, dict) else gr.skip(),
        gr.skip(),
        gr.skip(),
        notice,
    ]


def _json_action(text: str | None) -> dict[str, Any]:
    """The action typed in the JSON editor.

    Raises:
        FormError: it is not a JSON object; the message says where, in plain words.
    """
    try:
        action = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise FormError(
            f"the action in the JSON editor is not valid JSON (line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg.lower()}); fix it above and press Step again"
        ) from None
    if not isinstance(action, dict):
        raise FormError('the action in the JSON editor must be a JSON object, like {"field": value}')
    return action


_TOKEN = re.compile(r"[0-9a-f]{32}")


def _tab(play: PlayManager, token: str | None, request: gr.Request) -> str:
    """The key of this browser tab's sessions: its token (which outlives a reload) when it sent a
    well-formed one that no other visitor plays under, else this page's own session hash."""
    page = request.session_hash or "anonymous"
    token = (token or "").strip()
    if not _TOKEN.fullmatch(token):
        return page
    visitor = visitor_of(request)
    if any(t == token and s.visitor != visitor for (t, _), s in play.sessions.items()):
        return page  # someone else's token: it reaches nothing of theirs
    play.attach(page, token)
    return token


def _unchanged(error: str) -> list[Any]:
    """The outputs when a step is refused or fails: said beside the controls, the rest as it was."""
    return [gr.skip(), gr.skip(), "", *([gr.skip()] * 5), views.message(error, "error")]


def _reset_refused(error: str) -> list[Any]:
    """The outputs when a reset is refused or fails: said beside the Reset button."""
    return [gr.skip(), gr.skip(), views.message(error, "error"), *([gr.skip()] * 5), ""]


# After a reset or a step (in the browser, no call to the Hub): when the env's picture or the Step
# button (or the action buttons) under it is not all on the screen (a phone, where the seed and options boxes stack above
# it), the picture is scrolled to the top, with the actions under it; a picture already in view with
# its Step button is left where it is. Measured on the screen of the page around the panel too (the
# env page frames it).
PICTURE_IN_VIEW = """() => {
  const picture = document.getElementById("oe-play-frame");
  if (!picture) return;
  const step = document.getElementById("oe-play-step") || document.getElementById("oe-play-choices");
  let shift = 0, view = window;
  try {
    if (window.frameElement) { shift = window.frameElement.getBoundingClientRect().top; view = window.parent; }
  } catch (e) {}
  const top = picture.getBoundingClientRect().top + shift;
  const bottom = Math.max(picture.getBoundingClientRect().bottom, step ? step.getBoundingClientRect().bottom : 0) + shift;
  if (top < -2 || bottom > view.innerHeight + 2) {
    // the reward and steps above the picture too, when all of it fits on the screen
    const status = document.getElementById("oe-play-status");
    const fits = status && bottom - (status.getBoundingClientRect().top + shift) <= view.innerHeight;
    (fits ? status : picture).scrollIntoView({block: "start"});
  }
}"""


# After an answer to Reset, Step or an action button (in the browser): the frame fitted to the
# panel, the picture brought into view, and the next queued move sent (PANEL_SCRIPT).
AFTER_ANSWER = (
    "() => { window.oePlayFit && window.oePlayFit(); ("
    + PICTURE_IN_VIEW
    + ")(); window.oePlayAnswered && window.oePlayAnswered(); }"
)

# What the busy line says before any move (PANEL_SCRIPT writes it afterwards).
BUSY_LINE = (
    '<div id="oe-play-queue" class="oe-queue" role="status" aria-live="polite"></div>'
    '<div id="oe-play-ended" role="alert"></div>'  # a session that ended unused, said in the browser
)

# Moves a visitor may queue while one is being played; a move past them is refused, and said so.
MAX_QUEUED = 16

# In the page's <head> (see site.py): the panel's input and its frame.
# - Framed in an env's page, the panel sizes its frame to its content, whatever the width and
#   whenever the content changes: one scrollbar, the page's. The env page runs no script of its
#   own (its CSP says script-src 'none'), and the panel is same-origin, so the panel sets its
#   frame's height itself (window.frameElement), and tells the parent too (postMessage) for a page
#   that frames it from elsewhere and listens.
# - Every action button click, action key and Step press is played in order: while one is being
#   played the next wait in a queue (at most MAX_QUEUED, the count shown), and whatever cannot be
#   played is refused in words: a key with no legal move now (a wall), a full queue, an episode
#   over, a session that ended. A held key plays again each time the last move is answered.
# - A session unused past the Hub's idle timeout is shown ended, its controls off, with one button
#   that starts a new episode.
PANEL_SCRIPT = (
    """
<style>
html.oe-framed, html.oe-framed body { height: auto !important; min-height: 0 !important; overflow-y: hidden; }
.oe-framed gradio-app, .oe-framed .gradio-container, .oe-framed .main, .oe-framed .wrap, .oe-framed .contain { min-height: 0 !important; }
.oe-framed footer { display: none !important; }
.oe-queue:empty { display: none; }
.oe-queue { padding: 4px 10px; border-radius: 6px; margin: 4px 0; background: #f6f8fa; color: #1f2328; }
.oe-queue.oe-refused { background: #fff8c5; color: #6c4400; }
.oe-expired #oe-play-frame, .oe-expired #oe-play-buttons, .oe-expired #oe-play-step { opacity: .45; }
button.oe-restart { margin-left: 8px; padding: 4px 12px; border-radius: 6px; border: 1px solid #0550ae; background: #0550ae; color: #fff; font: inherit; cursor: pointer; }
</style>
<script>
(() => {
  const MAX = """
    + str(MAX_QUEUED)
    + r""";
  const NAMES = { ArrowUp: "↑", ArrowDown: "↓", ArrowLeft: "←", ArrowRight: "→", Space: "space" };
  const queue = [], offByUs = [];
  let busy = false, sentAt = 0, deadline = 0, expired = false, note = "", noteRefused = false;
  const $ = (selector) => document.querySelector(selector);
  const framed = () => { try { return window.frameElement; } catch (e) { return null; } };
  let fitted = 0;
  window.oePlayFit = () => {
    const root = $(".gradio-container");
    if (!root || window.parent === window) return;
    const height = Math.ceil(root.getBoundingClientRect().bottom + window.scrollY) + 4;
    if (Math.abs(height - fitted) < 2) return;
    fitted = height;
    const frame = framed();
    if (frame) frame.style.height = height + (frame.offsetHeight - frame.clientHeight) + "px";  // its border too
    window.parent.postMessage({ openenvPanelHeight: height }, location.origin);
  };
  const show = () => {
    const line = $("#oe-play-queue");
    if (!line) return;
    let text = note;
    if (busy) text = "Playing your move…" + (queue.length ? " " + queue.length + " more queued (they play in order)." : "") + (note ? " " + note : "");
    line.textContent = text;
    line.classList.toggle("oe-refused", noteRefused);
  };
  const refuse = (text) => { note = text; noteRefused = true; show(); };
  const buttons = () => Array.from(document.querySelectorAll("#oe-play-choices button[data-choice]"))
    .filter((b) => b.offsetParent !== null);
  const find = (item) => {
    if (item.kind === "step") return $("#oe-play-step");
    const all = buttons();
    if (item.kind === "key") return all.find((b) => b.classList.contains("oe-key-" + item.key));
    return all.find((b) => b.textContent === item.label);
  };
  const send = (item, button) => {
    busy = true; sentAt = Date.now(); note = ""; noteRefused = false;
    if (item.kind === "step") { button.click(); return; }
    const box = $("#oe-play-pick textarea, #oe-play-pick input"), go = $("#oe-play-go");
    if (!box || !go) { busy = false; return; }
    box.value = button.dataset.choice;
    box.dispatchEvent(new Event("input", { bubbles: true }));
    setTimeout(() => go.click(), 0);
  };
  let sendingStep = false;
  const pump = () => {
    while (!busy && queue.length) {
      const item = queue.shift();
      const button = find(item);
      if (!button || button.disabled) {
        const over = $("#oe-play-over") || (button && button.disabled);
        refuse("“" + item.name + "” was not played: " + (over ? "the episode is over; press Reset to play again." : "it is not a legal move now.") + (queue.length ? " " + queue.length + " more queued." : ""));
        continue;
      }
      if (item.kind === "step") { sendingStep = true; send(item, button); sendingStep = false; }
      else send(item, button);
    }
    show();
  };
  const idle = () => { const span = $("#oe-play-idle"); return span ? Number(span.dataset.idleS) : 0; };
  window.oePlayAnswered = () => {
    busy = false;
    const gone = $("#oe-play-step-error #oe-play-expired");  // the Hub found the session gone
    if (gone) { expired = true; document.documentElement.classList.add("oe-expired"); queue.length = 0; note = ""; show(); return; }
    expired = false; document.documentElement.classList.remove("oe-expired");
    offByUs.splice(0).forEach((b) => { b.disabled = false; });  // the page may keep them (the same board)
    const ended = $("#oe-play-ended");
    if (ended) ended.textContent = "";
    const seconds = idle();
    deadline = seconds > 0 ? Date.now() + seconds * 1000 : 0;
    pump();
  };
  const enqueue = (item) => {
    if (expired) { refuse("“" + item.name + "” was not played: your session ended; press “Start a new episode”."); return; }
    if (queue.length >= MAX) { refuse("“" + item.name + "” was not played: " + MAX + " moves are already waiting."); return; }
    queue.push(item);
    if (!busy) { note = ""; noteRefused = false; }
    pump();
  };
  const expire = () => {
    expired = true; queue.length = 0; busy = false;
    document.documentElement.classList.add("oe-expired");
    document.querySelectorAll("#oe-play-choices button, #oe-play-step").forEach((b) => {
      if (!b.disabled) { b.disabled = true; offByUs.push(b); }
    });
    const slot = $("#oe-play-ended");
    if (slot) {
      slot.innerHTML = '<div class="oe-msg oe-error" id="oe-play-expired"></div>';
      const box = slot.firstChild;
      box.textContent = "Your session ended after " + Math.round(idle() / 60) + " min unused, so nothing you press now is played. ";
      const restart = document.createElement("button");
      restart.type = "button"; restart.className = "oe-restart"; restart.id = "oe-play-restart";
      restart.textContent = "Start a new episode";
      box.appendChild(restart);
    }
    note = ""; show(); window.oePlayFit();
  };
  setInterval(() => {
    if (deadline && !expired && Date.now() > deadline) expire();
    if (busy && Date.now() - sentAt > 120000) { busy = false; refuse("The last move got no answer in 2 minutes; press Reset if the env seems stuck."); pump(); }
  }, 500);
  document.addEventListener("click", (event) => {
    const target = event.target instanceof Element ? event.target : null;
    if (!target) return;
    if (target.closest("#oe-play-restart")) {
      const reset = $("#oe-play-reset");
      const ended = $("#oe-play-ended");
      if (ended) ended.textContent = "";
      if (reset) { expired = false; busy = true; sentAt = Date.now(); reset.click(); }
      return;
    }
    if (target.closest("#oe-play-reset")) { queue.length = 0; busy = true; sentAt = Date.now(); note = ""; noteRefused = false; show(); return; }
    const step = target.closest("#oe-play-step");
    if (step && !sendingStep) {
      if (busy || expired) { event.preventDefault(); event.stopImmediatePropagation(); enqueue({ kind: "step", name: "Step" }); }
      else { busy = true; sentAt = Date.now(); note = ""; noteRefused = false; show(); }
      return;
    }
    const button = target.closest("#oe-play-choices button[data-choice]");
    if (button && !button.disabled) enqueue({ kind: "choice", label: button.textContent, name: button.textContent });
  }, true);
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target instanceof Element && event.target.closest("input, textarea, select, [contenteditable]")) return;
    const key = event.key === " " ? "Space" : event.key;
    if (!/^[A-Za-z0-9]+$/.test(key)) return;
    const all = buttons();
    if (!all.length) return;  // no action buttons (a free-form action, or no episode yet)
    const keyed = all.some((b) => Array.from(b.classList).some((c) => c.startsWith("oe-key-")));
    const known = /^Arrow/.test(key) || key === "Space" || all.some((b) => b.classList.contains("oe-key-" + key));
    if (!keyed || !known) return;
    event.preventDefault();
    // A held key plays again once the last move is answered; it does not pile up moves unseen.
    if (event.repeat && (busy || queue.length)) return;
    const name = NAMES[key] || key;
    if (!expired && !busy && !queue.length && !all.some((b) => b.classList.contains("oe-key-" + key))) {
      refuse("“" + name + "” was not played: it is not a legal move now (a wall, say); nothing changed.");
      return;
    }
    enqueue({ kind: "key", key: key, name: name });
  });
  if (new URLSearchParams(location.search).get("panel") === "play") {
    // This tab's token: its play session outlives a reload, and the panel loaded again resumes it.
    let token = sessionStorage.getItem("oe-play-token") || "";
    const had = /^[0-9a-f]{32}$/.test(token);
    if (!had) {
      token = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
      sessionStorage.setItem("oe-play-token", token);
    }
    const handOver = () => {
      const box = $("#oe-play-token textarea, #oe-play-token input"), resume = $("#oe-play-resume");
      if (!box || !resume) return false;
      box.value = token;
      box.dispatchEvent(new Event("input", { bubbles: true }));
      if (had) { busy = true; sentAt = Date.now(); setTimeout(() => resume.click(), 0); }
      return true;
    };
    let handed = false;
    const watch = setInterval(() => {
      if (!handed) handed = handOver();
      if (handed) clearInterval(watch);
}, 250);
    let watched = null;
    const refit = () => {
      const root = $(".gradio-container");
      if (root && root !== watched && window.ResizeObserver) {
        watched = root;
        new ResizeObserver(() => window.oePlayFit()).observe(root);
      }
      window.oePlayFit();
    };
    window.addEventListener("load", refit);
    new MutationObserver(refit).observe(document.documentElement, { childList: true, subtree: true });
  }
})();
</script>"""
)


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
            # This browser tab's token (PANEL_SCRIPT, kept in sessionStorage): the session it plays
            # outlives a reload, and a page loaded again resumes its episode (`resume`).
            token = gr.Textbox(visible="hidden", elem_id="oe-play-token", label="tab")
            resume = gr.Button("Resume", visible="hidden", elem_id="oe-play-resume")
            form_slot = gr.Column()
            # Beside the controls that cause them: a step's refusal or failure, and the moves queued
            # (PANEL_SCRIPT keeps the second up to date in the browser).
            step_error = gr.HTML(elem_id="oe-play-step-error")
            gr.HTML(BUSY_LINE, elem_id="oe-play-busy")
        with gr.Column(scale=2, min_width=300):
            observation = gr.HTML(views.observation_view(None), elem_id="oe-play-observation")
            gr.Markdown("**Actions this episode**")
            history = gr.HTML(views.history_table([]), elem_id="oe-play-history")
            end = gr.Button("End my session", size="sm", elem_id="oe-play-end")
    shown = [board_state, form_state, error, status, picture, choices, observation, history, step_error]

    async def do_reset(
        env_id: str | None, seed_text: str, options_text: str, old_form: Any, token_text: str, request: gr.Request
    ) -> list[Any]:
        tab = _tab(play, token_text, request)
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
            return [*_reset_refused(without_addresses(exc.message)), hint]
        except EnvServerError as exc:  # the env refused the reset (its options, say): its session goes on
            return [*_reset_refused(describe_env_failure(exc)), hint]
        except OpenEnvError as exc:
            await play.close(tab, "play")
            failed = views.message(describe_env_failure(exc), "error")
            return [None, None, failed, "", "", "", gr.skip(), gr.skip(), "", gr.skip()]
        except Exception:  # a fault of the Hub's own: logged in full, told plainly, the session kept
            log.exception("play reset on %s failed", env_id)
            return [
                *_reset_refused("the Hub could not start this episode (its own fault, logged); press Reset again"),
                hint,
            ]
        return [*await _shown(session, None, old_form), hint]

    # The options box learns this env's own options (and their defaults) from its first session.
    reset.click(do_reset, inputs=[current, seed, options, form_state, token], outputs=[*shown, options]).then(
        None, js=AFTER_ANSWER
    )

    async def do_end(token_text: str, request: gr.Request) -> list[Any]:
        closed = await play.close(_tab(play, token_text, request), "play")
        note = "Your session has ended." if closed else "You have no session open."
        return [
            None,
            None,
            views.message(note),
            "",
            "",
            "",
            views.observation_view(None),
            views.history_table([]),
            "",
        ]

    end.click(do_end, inputs=[token], outputs=shown)

    async def do_resume(token_text: str, old_form: Any, request: gr.Request) -> list[Any]:
        """A page loaded again (a reload) shows the episode its browser tab was playing, if it lives."""
        session = play.get(_tab(play, token_text, request), "play")
        env_id = dict(getattr(request, "query_params", None) or {}).get("env")
        if session is None or session.last is None or session.env_id != env_id:
            return [gr.skip()] * len(shown)
        outputs = await _shown(session, None, old_form)
        steps = len(session.history)
        outputs[-1] = views.message(f"Your episode goes on where it was before the reload ({steps} steps played).")
        return outputs

    resume.click(do_resume, inputs=[token, form_state], outputs=shown).then(None, js=AFTER_ANSWER)

    async def step_with(
        action: dict[str, Any], old_board: Any, old_form: Any, token_text: str, request: gr.Request
    ) -> list[Any]:
        session = play.get(_tab(play, token_text, request), "play")
        if session is None:
            return _expired(old_board)
        if session.done:
            return _unchanged("episode over — reset to play again")
        before = _seen(session, session.shown_picture)
        try:
            await session.step(action)
        except OpenEnvError as exc:  # refused or failed in the env, or the connection: said plainly
            return _unchanged(describe_env_failure(exc))
        return await _shown(session, old_board, old_form, before)

    async def do_choice(picked: str, old_board: Any, old_form: Any, token_text: str, request: gr.Request) -> list[Any]:
        serial, _, index = (picked or "").partition(":")
        stale = "that button belongs to a board already replaced, so nothing was played; press it again"
        if not isinstance(old_board, dict) or not old_board.get("choices") or serial != str(old_board.get("serial")):
            return _unchanged(stale)
        try:
            action = old_board["choices"][int(index)]["action"]
        except (ValueError, IndexError):
            return _unchanged(stale)
        return await step_with(action, old_board, old_form, token_text, request)

    # A step is one POST answered with its outputs (not a queue join and an event stream), without
    # Gradio's progress overlay on every output (the busy line says a move is being played): each
    # cost the browser more than the step itself (benchmarks/play_latency.py).
    go.click(
        do_choice,
        inputs=[pick, board_state, form_state, token],
        outputs=shown,
        trigger_mode="once",
        queue=False,
        show_progress="hidden",
    ).then(None, js=AFTER_ANSWER)

    with form_slot:
        # Drawn when an episode's form arrives, not also when the page loads (there is none then): one
        # event fewer at the page's start (site.py says why that matters).
        @gr.render(inputs=[form_state], triggers=[form_state.change])
        def action_form(form: dict[str, Any] | None) -> None:
            if form:
                _action_form(form["schema"], bool(form["done"]), board_state, form_state, token, step_with, shown)


# Said above the form while the JSON editor holds the action (see `_action_form`).
FORM_OFF = (
    "The form is off while “Edit the action as JSON” is ticked: the JSON below is the action that "
    "Step plays. Untick the box to use the form again (it is filled from the JSON)."
)


def _action_form(
    schema: dict[str, Any],
    done: bool,
    board_state: gr.State,
    form_state: gr.State,
    token: Any,
    step_with: Any,
    shown: list[Any],
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

    controls = [step, as_json, json_box, *inputs]

    async def do_step(data: dict[Any, Any], request: gr.Request) -> list[Any]:
        try:
            action = _json_action(data[json_box]) if data[as_json] else collect(specs, [data[c] for c in inputs])
        except (FormError, ValueError) as exc:
            return [*_unchanged(str(exc)), *([gr.skip()] * len(controls))]
        answer = await step_with(action, data[board_state], data[form_state], data[token], request)
        # A step that ends the episode turns this form off in the same answer. The form is drawn again
        # only when its state changes through the queue, and this step skips the queue.
        form = answer[1]
        over = isinstance(form, dict) and bool(form.get("done"))
        return [*answer, *([gr.update(interactive=False) if over else gr.skip()] * len(controls))]

    step.click(  # one POST, no progress overlay: as the action buttons' steps (play_panel says why)
        do_step,
        inputs={board_state, form_state, as_json, json_box, token, *inputs},
        outputs=[*shown, *controls],
        queue=False,
        show_progress="hidden",
    ).then(None, js=AFTER_ANSWER)
