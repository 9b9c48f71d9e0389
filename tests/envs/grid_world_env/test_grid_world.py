"""grid_world_env: layouts, moves, seeding, the wire, a 1,000-step concurrent soak and the image."""

from __future__ import annotations

import asyncio
import random
from collections import deque

import pytest
from grid_world_env import GridAction, GridWorldEnv
from grid_world_env.server.grid_environment import MOVES, GridWorldEnvironment

from openenv import EnvExecutionError, InvalidActionError
from tests.envs.conftest import serve_env
from tests.envs.soak import describe, soak, wait_sessions_closed


@pytest.fixture(scope="module")
def url():
    with serve_env("grid_world_env") as base:
        yield base


def shortest_path(grid: list[str], start: tuple[int, int], goal: tuple[int, int]) -> list[str]:
    """Moves from start to goal avoiding walls and pits (a test oracle, written independently)."""
    todo, came = deque([start]), {start: None}
    while todo:
        cell = todo.popleft()
        if cell == goal:
            break
        for name, (dr, dc) in MOVES.items():
            nxt = (cell[0] + dr, cell[1] + dc)
            if 0 <= nxt[0] < len(grid) and 0 <= nxt[1] < len(grid) and nxt not in came and grid[nxt[0]][nxt[1]] in ".G":
                came[nxt] = (cell, name)
                todo.append(nxt)
    path, cell = [], goal
    while came[cell] is not None:
        cell, name = came[cell]
        path.append(name)
    return path[::-1]


def test_every_layout_has_a_path_and_the_text_shows_it() -> None:
    env = GridWorldEnvironment()
    for seed in range(100):
        obs = env.reset(seed=seed, size=8, walls=0.3, pits=3)
        rows = obs.grid.splitlines()
        assert len(rows) == 8 and all(len(r) == 8 for r in rows)
        assert sum(r.count("A") for r in rows) == 1 and sum(r.count("G") for r in rows) == 1
        assert sum(r.count("X") for r in rows) == 3
        r, c = obs.position
        assert rows[r][c] == "A" and rows[obs.goal[0]][obs.goal[1]] == "G"
        assert shortest_path(rows, tuple(obs.position), tuple(obs.goal))


def test_walking_the_shortest_path_reaches_the_goal() -> None:
    env = GridWorldEnvironment()
    obs = env.reset(seed=3, size=10, walls=0.25, pits=2)
    path = shortest_path(obs.grid.splitlines(), tuple(obs.position), tuple(obs.goal))
    total = 0.0
    for move in path:
        obs = env.step(GridAction(move=move))
        total += obs.reward
    assert obs.done and obs.outcome == "goal" and obs.reward == 1.0
    assert total == pytest.approx(1.0 - 0.01 * (len(path) - 1))
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(GridAction(move="up"))


def test_walls_stop_you_and_pits_end_the_episode() -> None:
    env = GridWorldEnvironment()
    for seed in range(200):
        obs = env.reset(seed=seed, size=5, walls=0.2, pits=2)
        blocked = [m for m in MOVES if m not in obs.legal_moves]
        if blocked:
            after = env.step(GridAction(move=blocked[0]))
            assert after.position == obs.position and after.reward == -0.01 and "bump" in after.text
            break
    for seed in range(500):
        obs = env.reset(seed=seed, size=4, walls=0.0, pits=4)
        rows = obs.grid.splitlines()
        for move, (dr, dc) in MOVES.items():
            r, c = obs.position[0] + dr, obs.position[1] + dc
            if 0 <= r < 4 and 0 <= c < 4 and rows[r][c] == "X":
                after = env.step(GridAction(move=move))
                assert after.done and after.outcome == "pit" and after.reward == -1.0
                return
    pytest.fail("no start next to a pit in 500 layouts")


def test_episodes_are_cut_off_after_max_steps() -> None:
    env = GridWorldEnvironment()
    for seed in range(100):
        obs = env.reset(seed=seed, max_steps=3, pits=0)
        blocked = [m for m in MOVES if m not in obs.legal_moves]
        if blocked:  # bumping into a wall keeps us in place: only the cut-off can end this
            for _ in range(3):
                assert not obs.done
                obs = env.step(GridAction(move=blocked[0]))
            assert obs.done and obs.outcome == "timeout" and obs.steps_left == 0 and obs.reward == -0.01
            return
    pytest.fail("no start next to a wall in 100 layouts")


def test_same_seed_same_layout_and_slips() -> None:
    a, b = GridWorldEnvironment(), GridWorldEnvironment()
    moves = [random.Random(0).choice(list(MOVES)) for _ in range(30)]
    traces = []
    for env in (a, b):
        obs, trace = env.reset(seed=7, slip=0.3, pits=0), []
        for m in moves:
            if obs.done:
                break
            obs = env.step(GridAction(move=m))
            trace.append(obs.model_dump())
        traces.append(trace)
    assert traces[0] == traces[1]
    assert any("slip" in t["text"] for t in traces[0])
    layouts = {GridWorldEnvironment().reset(seed=s).grid for s in range(20)}
    assert len(layouts) == 20


def test_bad_options_say_what_is_allowed() -> None:
    env = GridWorldEnvironment()
    with pytest.raises(ValueError, match="size must be"):
        env.reset(size=50)
    with pytest.raises(ValueError, match="slip must be"):
        env.reset(slip=0.9)


async def test_client_round_trip_and_errors(url: str) -> None:
    async with GridWorldEnv(url) as env:
        first = await env.reset(seed=5, size=5)
        assert "A" in first.observation.grid and first.observation.steps_left == 100
        result = await env.step(GridAction.model_validate({"move": "  LEFT "}))
        assert result.reward in (-0.01, 1.0, -1.0)
        with pytest.raises(InvalidActionError, match="move"):
            await env.step({"move": "jump"})
        with pytest.raises(EnvExecutionError, match="walls must be"):
            await env.reset(walls=2)
        state = await env.state()
        assert state.size == 5 and state.step_count == 1


async def test_concurrent_sessions_with_one_seed_see_the_same_world(url: str) -> None:
    async def run() -> list:
        rng = random.Random(1)
        async with GridWorldEnv(url) as env:
            out = [(await env.reset(seed=21, slip=0.2)).observation]
            for _ in range(40):
                if out[-1].done:
                    break
                out.append((await env.step(GridAction(move=rng.choice(list(MOVES))))).observation)
            return out

    first, second = await asyncio.gather(run(), run())
    assert first == second


@pytest.mark.slow
async def test_soak_1000_random_steps_over_4_sessions(url: str, server_errors: list) -> None:
    report = await soak(
        url,
        GridWorldEnv,
        lambda rng, obs: GridAction(move=rng.choice(list(MOVES))),
        reset_kwargs={"size": 5, "slip": 0.1},
    )
    assert report.steps == 1000 and report.episodes > 0
    assert (await wait_sessions_closed(url))["status"] == "healthy"
    assert not server_errors, describe(server_errors)


@pytest.mark.docker
@pytest.mark.slow
async def test_image_serves_episodes(env_images) -> None:
    with env_images.run("grid_world_env") as base:
        async with GridWorldEnv(base) as env:
            result = await env.reset(seed=2)
            for move in ("up", "left", "down"):
                result = await env.step(GridAction(move=move))
            assert (await env.state()).step_count == 3 and result.observation.grid


def test_render_draws_the_grid_with_you_where_the_observation_says() -> None:
    from openenv.render import as_frame, sanitize_frame

    env = GridWorldEnvironment()
    obs = env.reset(seed=3, size=5)
    frame = sanitize_frame(as_frame(env.render()))  # type: ignore[arg-type]
    svg = frame.text()
    assert frame.media_type == "image/svg+xml" and svg.count("<rect") == 25 and 'viewBox="0 0 200 200"' in svg
    move = obs.legal_moves[0]
    obs = env.step(GridAction(move=move))
    row, col = obs.position
    assert f'cx="{col * 40 + 20}" cy="{row * 40 + 20}"' in env.render()[1]
    assert obs.grid == env.grid_text() and "A" in obs.grid  # the text grid is still in the observation
