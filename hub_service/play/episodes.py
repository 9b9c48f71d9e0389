"""Run N episodes of a policy on a play session, yielding what happens step by step.

Events (plain dicts, in order): `{"type": "episode", "episode", "observation"}` at each reset;
`{"type": "step", "episode", "step", "prompt", "raw", "action", "observation", "reward", "done",
"error"}` per turn (an unparsable answer or a refused action has `error` set and no env step);
`{"type": "episode_end", "episode", "return", "steps", "invalid", "reason"}`; and last
`{"type": "summary", "episodes", "returns", "score", "invalid", "steps", "stopped"}` (score: mean
return; `stopped`: None, or why the try ended at once: the model cannot be asked at all).
With `render`, episode and step events carry `frame`: the env's picture after it (or None).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from hub_service.play.policies import Policy, RandomPolicy
from hub_service.play.sessions import PlaySession

__all__ = ["run_episodes"]

GIVE_UP_AFTER = 3  # consecutive unusable answers end the episode


async def _frame(session: PlaySession) -> Any:
    from openenv.errors import EnvServerError

    try:
        return await session.render()
    except EnvServerError:  # the env could not draw: the trajectory goes on without its picture
        return None


async def run_episodes(
    session: PlaySession,
    policy: Policy,
    *,
    episodes: int,
    max_steps: int,
    seed: int | None = None,
    render: bool = False,
) -> AsyncIterator[dict[str, Any]]:
    """Play `episodes` episodes of at most `max_steps` turns each; yields the events above."""
    from openenv.errors import EnvDisconnectedError, EnvServerError, InvalidActionError

    returns: list[float] = []
    invalid_total = steps_total = 0
    stopped: str | None = None
    for episode in range(1, episodes + 1):
        result = await session.reset(seed=None if seed is None else seed + episode - 1)
        start: dict[str, Any] = {"type": "episode", "episode": episode, "observation": result["observation"]}
        if render:
            start["frame"] = await _frame(session)
        yield start
        observation, total, invalid, streak, reason, turn = result["observation"], 0.0, 0, 0, "max steps reached", 0
        done = bool(result["done"])
        while not done and turn < max_steps:
            turn += 1
            decision = await policy.act(observation, turn)
            event: dict[str, Any] = {
                "type": "step",
                "episode": episode,
                "step": turn,
                "prompt": decision.prompt,
                "raw": decision.raw,
                "action": decision.action,
                "observation": None,
                "reward": None,
                "done": False,
                "error": decision.error,
            }
            if decision.action is not None:
                try:
                    out = await session.step(decision.action)
                except InvalidActionError as exc:
                    event["error"] = f"the env refused the action: {_first_line(exc)}"
                except EnvDisconnectedError as exc:
                    event["error"] = f"the env session ended: {_first_line(exc)}"
                    yield event
                    reason = "the env session ended"
                    invalid += 1
                    break
                except EnvServerError as exc:
                    event["error"] = f"the env failed on this action: {_first_line(exc)}"
                else:
                    observation, done = out["observation"], bool(out["done"])
                    total += float(out["reward"] or 0.0)
                    event.update(observation=observation, reward=out["reward"], done=done)
                    if render:
                        event["frame"] = await _frame(session)
            steps_total += 1
            if decision.fatal:
                stopped = decision.error
                invalid += 1
                yield event
                # the random baseline's reason is its own (no baseline for free-form actions, ...)
                reason = (
                    (decision.error or "the random baseline could not play")
                    if isinstance(policy, RandomPolicy)
                    else "the model could not be asked"
                )
                break
            if event["error"]:
                invalid += 1
                streak += 1
                policy.feedback(decision, event["error"])
            else:
                streak = 0
            yield event
            if done:
                reason = "done"
            elif streak >= GIVE_UP_AFTER:
                reason = f"gave up after {GIVE_UP_AFTER} unusable answers in a row"
                break
        returns.append(total)
        invalid_total += invalid
        yield {
            "type": "episode_end",
            "episode": episode,
            "return": total,
            "steps": turn,
            "invalid": invalid,
            "reason": reason,
        }
        if stopped:
            break
    yield {
        "type": "summary",
        "episodes": len(returns),
        "returns": returns,
        "score": sum(returns) / len(returns) if returns else 0.0,
        "invalid": invalid_total,
        "steps": steps_total,
        "stopped": stopped,
    }


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
