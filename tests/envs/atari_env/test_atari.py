"""atari_env: bundled ROMs, PNG frames, RAM, frame skip, seeding, the wire, the soak and the image."""

from __future__ import annotations

import asyncio
import base64
import random
from pathlib import Path

import numpy as np
import pytest
from atari_env import AtariAction, AtariEnv, decode_png
from atari_env.server.atari_environment import AtariEnvironment, available_games, encode_png

from openenv import EnvExecutionError, InvalidActionError
from tests.envs.conftest import serve_env
from tests.envs.soak import describe, soak, wait_sessions_closed


@pytest.fixture(scope="module")
def url():
    with serve_env("atari_env") as base:
        yield base


def test_the_wheel_ships_the_roms() -> None:
    from ale_py import roms

    games = available_games()
    assert len(games) > 100 and {"pong", "breakout", "space_invaders", "ms_pacman"} <= set(games)
    assert all(Path(roms.get_rom_path(g)).is_file() for g in ("pong", "breakout"))


@pytest.mark.parametrize("shape", [(210, 160, 3), (210, 160), (3, 5, 3)])
def test_png_round_trip(shape: tuple[int, ...]) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, size=shape, dtype=np.uint8)
    data, got_shape = decode_png(encode_png(pixels))
    assert got_shape == shape and np.array_equal(np.frombuffer(data, np.uint8).reshape(shape), pixels)
    with pytest.raises(ValueError, match="not a PNG"):
        decode_png(b"GIF89a")


def test_reset_gives_the_screen_the_ram_and_the_action_names() -> None:
    env = AtariEnvironment()
    obs = env.reset(seed=0, game="breakout")
    assert obs.image_shape == [210, 160, 3] and len(obs.ram) == 128 and all(0 <= b < 256 for b in obs.ram)
    assert obs.legal_actions == ["NOOP", "FIRE", "RIGHT", "LEFT"] and obs.lives == 5 and obs.reward is None
    assert obs.frame().shape == (210, 160, 3) and obs.frame().any()
    assert len(env.reset(full_action_space=True).legal_actions) == 18
    gray = env.reset(seed=0, game="breakout", obs_type="grayscale")
    assert gray.image_shape == [210, 160, 1] and gray.frame().shape == (210, 160)


def test_frame_skip_and_points() -> None:
    env = AtariEnvironment()
    obs = env.reset(seed=1, game="pong", frameskip=3, repeat_action_probability=0.0)
    for _ in range(10):
        obs = env.step(AtariAction(action=0))
    assert obs.episode_frame_number == 30
    total = 0.0
    for _ in range(400):  # standing still, pong's computer player scores against us
        obs = env.step(AtariAction(action=0))
        total += obs.reward
    assert total < 0 and env.state.score == total


def test_same_seed_same_episode_and_seeds_differ() -> None:
    def trace(seed: int) -> list[list[int]]:
        env = AtariEnvironment()
        env.reset(seed=seed, game="breakout")
        rng = random.Random(0)
        return [env.step(AtariAction(action=rng.randrange(4))).ram for _ in range(60)]

    assert trace(3) == trace(3)
    assert trace(3) != trace(4)  # sticky actions are drawn from the seeded emulator


def test_bad_input_says_what_is_valid() -> None:
    env = AtariEnvironment()
    with pytest.raises(ValueError, match="did you mean breakout"):
        env.reset(game="breakuot")
    with pytest.raises(ValueError, match="frameskip must be"):
        env.reset(frameskip=0)
    env.reset(game="pong")
    with pytest.raises(ValueError, match="this game has 6 actions"):
        env.step(AtariAction(action=12))


def test_an_episode_ends_when_the_game_is_over() -> None:
    env = AtariEnvironment()
    obs = env.reset(seed=2, game="breakout")
    steps = 0
    while not obs.done:
        obs = env.step(AtariAction(action=1 if steps % 20 == 0 else 0))  # serve, then never move
        steps += 1
    assert obs.lives == 0 and not obs.truncated
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(AtariAction(action=0))
    cut = env.reset(seed=2, game="pong", max_episode_frames=40)
    while not cut.done:
        cut = env.step(AtariAction(action=0))
    assert cut.truncated and cut.episode_frame_number == 40


async def test_client_round_trip_and_errors(url: str) -> None:
    async with AtariEnv(url) as env:
        first = await env.reset(seed=5, game="space_invaders")
        assert first.observation.game == "space_invaders" and first.observation.frame().shape == (210, 160, 3)
        result = await env.step(AtariAction(action=1))
        assert isinstance(result.reward, float) and len(result.observation.ram) == 128
        assert base64.b64decode(result.observation.image).startswith(b"\x89PNG")
        with pytest.raises(InvalidActionError):
            await env.step({"action": -1})
        with pytest.raises(EnvExecutionError, match="out of range"):
            await env.step(AtariAction(action=17))
        with pytest.raises(EnvExecutionError, match="unknown game"):
            await env.reset(game="tetris2600")
        assert (await env.state()).game == "space_invaders"


async def test_concurrent_sessions_with_one_seed_see_the_same_frames(url: str) -> None:
    async def run() -> list[str]:
        async with AtariEnv(url) as env:
            await env.reset(seed=9, game="breakout")
            return [(await env.step(AtariAction(action=i % 4))).observation.image for i in range(40)]

    first, second = await asyncio.gather(run(), run())
    assert first == second


@pytest.mark.slow
async def test_soak_1000_random_steps_over_4_sessions(url: str, server_errors: list) -> None:
    report = await soak(
        url,
        AtariEnv,
        lambda rng, obs: AtariAction(action=rng.randrange(len(obs.legal_actions))),
        reset_kwargs={"game": "breakout"},
    )
    assert report.steps == 1000 and report.episodes > 0
    assert (await wait_sessions_closed(url))["status"] == "healthy"
    assert not server_errors, describe(server_errors)


@pytest.mark.docker
@pytest.mark.slow
async def test_image_plays_from_bundled_roms(env_images) -> None:
    with env_images.run("atari_env") as base:
        async with AtariEnv(base) as env:
            await env.reset(seed=1, game="pong")
            for _ in range(5):
                result = await env.step(AtariAction(action=2))
            assert result.observation.frame().shape == (210, 160, 3) and result.observation.episode_frame_number == 20


def test_render_is_the_screen_as_png() -> None:
    from openenv.render import as_frame

    env = AtariEnvironment()
    assert env.render() is None  # nothing to draw before the first reset
    env.reset(seed=0, game="pong")
    obs = env.step(AtariAction(action=0))
    frame = as_frame(env.render())
    assert frame is not None and frame.media_type == "image/png"
    assert frame.data == base64.b64decode(obs.image)  # the same screen the observation carries
    assert decode_png(frame.data)[1] == tuple(obs.image_shape)
    env.close()
