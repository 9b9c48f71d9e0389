"""The website's trust signals: badges on catalog cards and env pages, the catalog's trust
filters, and the env page's card (capacity, determinism, reward check).

The cards are JSON the smoke stage wrote (hub_service/pipeline/trust.py); any key may be missing
or null, so every figure is read defensively and every value escaped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import Any

import gradio as gr
from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog import service as catalog
from hub_service.errors import HubError

__all__ = ["CSS", "FILTER_CHOICES", "badge_row", "filter_controls", "trust_panel", "trust_view"]

# (label, ListQuery flag) of the catalog's trust checkboxes
FILTER_CHOICES = [("deterministic", "deterministic"), ("reward checked", "reward_checked")]
CSS = """
.oe-trust { max-width: 100%; overflow-wrap: anywhere; }
.oe-trust h4 { margin: 10px 0 4px; }
.oe-trust p, .oe-trust li { margin: 3px 0; }
.oe-trust .oe-kv { width: 100%; table-layout: fixed; }
.oe-trust .oe-kv th { width: 38%; white-space: normal; }
.oe-trust .oe-kv td { overflow-wrap: anywhere; }
.oe-trust code { white-space: pre-wrap; word-break: break-all; }
.oe-trust-badges { margin: 4px 0; }
.oe-trust .oe-rfc008 td:first-child { width: 44%; }
.oe-trust .oe-rfc008 .oe-fail { color: #b42318; font-weight: 600; }
"""

_BADGES = {
    "deterministic": ("deterministic", "the same seed gave the same trajectory twice"),
    "reward_checked": (
        "reward checked",
        "a random policy's play and answers built to cheat found nothing wrong with its rewards (see its trust card)",
    ),
    "forkable": ("forkable", "a snapshot restored twice, and forked, played the same future each time"),
}


_CHECK_LABELS = {cid: (label, title) for cid, label, title in catalog.CHECK_BADGES}


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _fig(value: Any, unit: str, digits: int = 1) -> str:
    number = _num(value)
    if number is None:
        return "not measured"
    text = f"{number:.{digits}f}".rstrip("0").rstrip(".") if digits else str(round(number))
    return f"{text} {unit}".strip()


def _sessions(held: int) -> str:
    return f"holds {held} session{'s' if held != 1 else ''}"


def badge_row(summary: Any, *, checks: bool = True) -> str:
    """Trust badges of an `EnvSummary` (catalog cards and the env page's header): the Hub's own trust
    cards', then, with `checks`, the RFC 008 checks passed (`data-check` is the check id); empty if none.
    The env page leaves the checks out of its header: its trust card lists every check by id, and on a
    phone the header stays short enough for the play panel's picture to start on the first screen."""
    pills = []
    for key in summary.badges or []:
        if key == "capacity" and isinstance(summary.sessions_held, int):
            label, title = (
                _sessions(summary.sessions_held),
                "concurrent sessions one server held in the smoke test's ramp",
            )
        elif key in _BADGES:
            label, title = _BADGES[key]
        else:
            continue
        pills.append(
            f'<span class="oe-pill oe-ok oe-trust-badge" data-badge="{escape(key)}" title="{escape(title)}">'
            f"{escape(label)}</span>"
        )
    for cid in (getattr(summary, "checks_passed", None) or []) if checks else []:
        if cid in _CHECK_LABELS:
            label, title = _CHECK_LABELS[cid]
            pills.append(
                f'<span class="oe-pill oe-ok oe-check-badge" data-check="{escape(cid)}" '
                f'title="{escape(cid)}: {escape(title)}">{escape(label)}</span>'
            )
    return f'<div class="oe-trust-badges">{"".join(pills)}</div>' if pills else ""


def _unchecked(card: dict[str, Any]) -> str | None:
    """Why a card is empty ("unchecked" verdict), else None."""
    if card.get("verdict") == "unchecked":
        return f"Not checked: {card.get('reason') or 'no reason given'}."
    return None


def _capacity(card: Any) -> str:
    if not isinstance(card, dict) or not card:
        return "<p>Not measured yet: the smoke test has not measured this revision.</p>"
    why = _unchecked(card)
    if why:
        return f"<p>{escape(why)}</p>"
    held = card.get("sessions_held")
    held_text = (
        f"{held} concurrent session{'s' if held != 1 else ''} per server" if isinstance(held, int) else "not measured"
    )
    stopped = card.get("stopped_because")
    rows = [
        ("cold start", _fig(card.get("cold_start_s"), "s", 2)),
        ("step latency", f"p50 {_fig(card.get('step_p50_ms'), 'ms')} · p95 {_fig(card.get('step_p95_ms'), 'ms')}"),
        (
            "memory",
            f"server {_fig(card.get('server_base_mb'), 'MB')} · per idle session {_fig(card.get('idle_session_mb'), 'MB', 2)}"
            f" · per active session {_fig(card.get('active_session_mb'), 'MB', 2)}",
        ),
        ("sessions held", held_text),
        ("session release", f"a closed session's place freed within {_fig(card.get('release_s'), 's', 2)}"),
        ("ramp stopped", str(stopped) if stopped else "not said"),
        ("image size", _fig(card.get("image_size_mb"), "MB")),
    ]
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    listed = card.get("ramp")
    ramp = [r for r in listed if isinstance(r, dict)] if isinstance(listed, list) else []
    steps = ""
    if ramp:
        lines = "".join(
            f"<tr><td>{escape(_fig(r.get('sessions'), '', 0))}</td><td>{escape(_fig(r.get('p99_ms'), 'ms'))}</td>"
            f"<td>{escape(_fig(r.get('errors'), '', 0))}</td></tr>"
            for r in ramp[:50]
        )
        steps = (
            f'<details><summary>the ramp, step by step</summary><table class="oe-table"><tr><th>sessions</th>'
            f"<th>p99 step</th><th>errors</th></tr>{lines}</table></details>"
        )
    listed_flags = card.get("flags")
    flags = [f for f in listed_flags if isinstance(f, str)][:10] if isinstance(listed_flags, list) else []
    flagged = '<ul class="oe-flags">' + "".join(f"<li>{escape(f)}</li>" for f in flags) + "</ul>" if flags else ""
    notes = card.get("notes")
    said = [n for n in notes if isinstance(n, str)][:10] if isinstance(notes, list) else []
    noted = '<ul class="oe-notes">' + "".join(f"<li>{escape(n)}</li>" for n in said) + "</ul>" if said else ""
    return f'<table class="oe-kv" id="oe-capacity">{body}</table>{flagged}{noted}{steps}'


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return "“" + (text if len(text) <= limit else text[:limit] + "…") + "”"


def _determinism(card: Any) -> str:
    if not isinstance(card, dict) or not card:
        return '<p id="oe-determinism">Not checked yet.</p>'
    verdict = card.get("verdict")
    steps = card.get("steps_compared", card.get("steps"))
    over = f" over {steps} step{'s' if steps != 1 else ''}" if isinstance(steps, int) and steps > 0 else ""
    if verdict == "deterministic":
        text = f"Deterministic: the same seed gave the same trajectory twice{over}."
    elif verdict == "stochastic":
        text = "Declared stochastic: the env says the same seed may give different episodes, so it is not held to one."
        if card.get("difference_seen") is True:
            text += " Two runs with the same seed did differ."
    elif verdict == "nondeterministic":
        diff = card.get("first_difference")
        text = f"Not deterministic: the same seed gave two different trajectories{over}."
        if isinstance(diff, dict):
            where = f"step {diff.get('step')}" if diff.get("step") is not None else "a step"
            field = f", in {str(diff.get('field'))[:80]}" if diff.get("field") else ""
            text += (
                f" They first differ at {where}{field}: the first run gave {_short(diff.get('first'))}, "
                f"the second {_short(diff.get('second'))}."
            )
        if card.get("rewards_match") is True:
            text += " Rewards and done flags were the same in both runs."
    else:
        text = _unchecked({**card, "verdict": "unchecked"}) or "Not checked."
    return f'<p id="oe-determinism">{escape(text)}</p>'


def _range(low: Any, high: Any) -> str | None:
    a, b = _num(low), _num(high)
    return f"{a:g} to {b:g}" if a is not None and b is not None else None


def _reward(card: Any) -> str:
    """The reward check's card: one conclusion (sound, flagged, inconclusive or not checked), what
    the play saw, the random baseline or why there is none, and what was flagged."""
    if not isinstance(card, dict) or not card:
        return '<div id="oe-reward-check"><p>Not checked yet.</p></div>'
    verdict = catalog.reward_verdict(card)
    raw_notes = card.get("notes")
    notes = [n[:300] for n in raw_notes[:5] if isinstance(n, str) and n] if isinstance(raw_notes, list) else []
    observed = _range(card.get("observed_min"), card.get("observed_max"))
    declared = card.get("declared_range")
    declared_text = _range(*declared) if isinstance(declared, list) and len(declared) == 2 else None
    parts = []
    if verdict == "ok":
        parts.append(f"<p>{escape(_sound(card, declared_text is not None))}</p>")
    elif verdict == "flagged":
        parts.append("<p>Flagged: the reward check found something a trainer should know.</p>")
    elif verdict == "inconclusive":  # the notes are its one conclusion's reasons, said once
        why = "; ".join(notes) or "the random policy's play showed too little"
        parts.append(f"<p>{escape(f'Inconclusive: the check cannot say whether the rewards are sound: {why}.')}</p>")
    else:
        parts.append(f"<p>{escape(_unchecked({**card, 'verdict': 'unchecked'}) or 'Not checked.')}</p>")
    if verdict not in ("ok", "flagged", "inconclusive"):
        return f'<div id="oe-reward-check">{"".join(parts)}</div>'
    facts = []
    low, high = _num(card.get("observed_min")), _num(card.get("observed_max"))
    if observed and low == high and low is not None:
        facts.append(f"every reward observed was {low:g}")
    elif observed:
        facts.append(f"observed {observed}")
    if declared_text:
        facts.append(f"declared {declared_text}")
    returns = card.get("baseline_returns")
    baseline = [n for n in (_num(r) for r in returns) if n is not None] if isinstance(returns, list) else []
    if baseline:
        facts.append(
            f"a random policy's mean return {sum(baseline) / len(baseline):g} over {len(baseline)} episode{'s' if len(baseline) != 1 else ''}"
        )
    elif isinstance(card.get("no_baseline"), str):
        facts.append(card["no_baseline"][:300])
    if facts:
        parts.append(f"<p>{escape('; '.join(facts))}.</p>")
    if verdict == "flagged":  # beside a flag, a note is one more thing seen, not a second conclusion
        parts.extend(f"<p>{escape(n)}.</p>" for n in notes)
    flags = [f for f in card.get("flags") or [] if isinstance(f, str)] if isinstance(card.get("flags"), list) else []
    if flags:
        parts.append('<ul class="oe-flags">' + "".join(f"<li>{escape(f)}</li>" for f in flags[:20]) + "</ul>")
    return f'<div id="oe-reward-check">{"".join(parts)}</div>'


def _sound(card: dict[str, Any], declared: bool) -> str:
    """The reward check's "nothing found" line, claiming only what the check saw: rewards that
    varied, stayed in a declared range, and answers built to cheat that did not score the top."""
    claims = []
    low, high = _num(card.get("observed_min")), _num(card.get("observed_max"))
    if low is not None and high is not None and high > low:
        claims.append("they vary")
    if declared and low is not None:
        claims.append("they stay in the declared range")
    probes = card.get("probes")
    tried = [p for p in (probes.values() if isinstance(probes, dict) else probes or []) if isinstance(p, dict)]
    scored = [p for p in tried if "reward" in p]
    # Only when none reached the top: without a declared range a long answer may score the top unflagged (echo's).
    if scored and not any(p.get("got_max") for p in scored):
        claims.append("an empty or oversized answer does not score the top")
    if not claims:
        return "Rewards look sound: the check found nothing wrong."
    joined = claims[0] if len(claims) == 1 else ", ".join(claims[:-1]) + " and " + claims[-1]
    return f"Rewards look sound: {joined}."


def trust_view(version: Any | None) -> str:
    """The env page's trust card for its current version (None: no verdict yet)."""
    if version is None:
        return '<div class="oe-trust" id="oe-trust"><p>Not checked yet: the pipeline has not passed a revision of this environment.</p></div>'
    return (
        f'<div class="oe-trust" id="oe-trust"><h4>Capacity</h4>{_capacity(version.capacity)}'
        f"<h4>Determinism</h4>{_determinism(version.determinism)}<h4>Reward check</h4>{_reward(version.reward_check)}"
        f"{_rfc008(getattr(version, 'rfc008', None))}</div>"
    )


_LEVELS = {1: "static", 2: "runtime", 3: "semantic", 4: "statistical"}


def _rfc008(report: Any) -> str:
    """RFC 008's report of the version, by check id: its verdict, then one row per check (status and
    the first line of its evidence), folded so that the card stays short."""
    if not isinstance(report, dict) or not isinstance(report.get("results"), list):
        return "<h4>RFC 008 checks</h4><p>No RFC 008 report for this revision.</p>"
    results = [r for r in report["results"] if isinstance(r, dict) and isinstance(r.get("check_id"), str)]
    counts = {s: sum(1 for r in results if r.get("status") == s) for s in ("pass", "fail", "skip", "error")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    levels = report.get("levels_run")
    levels = levels if isinstance(levels, list) else []
    rows = "".join(
        f'<tr data-check="{escape(r["check_id"])}" data-status="{escape(str(r.get("status")))}">'
        f"<td><code>{escape(r['check_id'])}</code></td>"
        f'<td><span class="{"oe-fail" if r.get("status") in ("fail", "error") else ""}">{escape(str(r.get("status")))}</span> '
        f"{escape(_short((r.get('evidence') or [''])[0]))}</td></tr>"
        for r in results
    )
    shown = ", ".join(_LEVELS.get(lv, str(lv)) for lv in levels if isinstance(lv, int))
    return (
        f'<h4>RFC 008 checks</h4><details class="oe-rfc008" data-verdict="{escape(str(report.get("verdict")))}">'
        f"<summary>verdict <b>{escape(str(report.get('verdict')))}</b> ({escape(str(report.get('lane')))} lane; "
        f"levels {escape(shown)}): {escape(summary)}</summary>"
        f'<table class="oe-kv"><tbody>{rows}</tbody></table></details>'
    )


def _env_id(request: gr.Request | None) -> tuple[str, str] | None:
    env_id = dict(request.query_params).get("env") if request else None
    if not env_id or env_id.count("/") != 1:
        return None
    owner, name = env_id.split("/")
    return (owner, name) if owner and name else None


def trust_panel(on_load: list[tuple[Callable[[gr.Request], Any], Any]], factory: sessionmaker[Session]) -> gr.HTML:
    """The env page's trust card, filled when the page loads (`/?env=owner/name`): its filler goes
    into `on_load`, which the site runs as its one load event."""
    box = gr.HTML(elem_id="oe-trust-box")

    def fill(request: gr.Request) -> Any:
        parts = _env_id(request)
        if parts is None:
            return gr.skip()
        try:
            with factory() as db:
                env = catalog.get_env(db, *parts)
                version = catalog.get_version(db, env, None) if env.latest_version_id is not None else None
                return trust_view(version if version is not None and version.id == env.latest_version_id else None)
        except HubError:
            return ""  # the page's header says what is wrong with the id

    on_load.append((fill, box))
    return box


def filter_controls() -> tuple[gr.CheckboxGroup, gr.Number, gr.Dropdown]:
    """The catalog's trust filters: checkboxes for the verdicts, a minimum of sessions per server,
    and the RFC 008 checks an env's report must have passed (by check id)."""
    from openenv.validation.rfc008 import load_policy

    trust = gr.CheckboxGroup(label="Trust", choices=FILTER_CHOICES, value=[], elem_id="oe-trust-filter", scale=2)
    sessions = gr.Number(
        label="Holds at least N sessions", value=None, minimum=0, precision=0, elem_id="oe-min-sessions", scale=1
    )
    checks = gr.Dropdown(
        label="Passed RFC 008 checks",
        choices=list(load_policy().entries),
        value=[],
        multiselect=True,
        elem_id="oe-check-filter",
        scale=2,
    )
    return trust, sessions, checks


def query_options(
    trust: list[str] | None, min_sessions: float | None, checks: list[str] | None = None
) -> dict[str, Any]:
    """`ListQuery` keyword arguments for the catalog's trust filters."""
    chosen = set(trust or [])
    sessions = int(min_sessions) if isinstance(min_sessions, (int, float)) and min_sessions > 0 else None
    return {
        "deterministic": True if "deterministic" in chosen else None,
        "reward_checked": True if "reward_checked" in chosen else None,
        "min_sessions": sessions,
        "checks": [c for c in checks or [] if isinstance(c, str)][:8],
    }
