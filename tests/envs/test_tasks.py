"""The Task API on the bundled envs that have natural task sets, end to end over the wire: wordle's
held-out words, grid world's fixed layouts and chess's mate-in-one puzzles are listed, and
`reset(split=..., index=...)` plays exactly that task; an env without tasks says so."""

from __future__ import annotations

import httpx
import pytest

from openenv import GenericEnvClient, NoTasksError
from tests.envs.conftest import serve_env


def test_wordle_plays_the_word_of_the_task() -> None:
    with serve_env("wordle_env") as url, GenericEnvClient(url).sync() as env:
        assert [s["name"] for s in env.list_splits()] == ["train", "test"]
        train, test = env.num_tasks("train"), env.num_tasks("test")
        assert train > 1000 and 100 < test < train / 5  # every tenth answer is held out
        task = env.get_task("test", 7)
        assert task["id"] == "test-7" and len(task["word"]) == 5
        assert task["word"] not in {t["word"] for t in env.get_task_range("train", 0, 200)}
        env.reset(split="test", index=7)
        win = env.step({"guess": task["word"]})
        assert win.done and win.reward == 1.0
        with pytest.raises(Exception, match="unknown split 'dev'"):
            env.reset(split="dev", index=0)


def test_grid_world_tasks_are_fixed_layouts() -> None:
    with serve_env("grid_world_env") as url, GenericEnvClient(url).sync() as env:
        assert [s["name"] for s in env.list_splits()] == ["train", "test"]
        layout = env.get_task("test", 3)
        first = env.reset(split="test", index=3).observation
        again = env.reset(split="test", index=3).observation  # the same grid every time, whatever came before
        other = env.reset(split="test", index=4).observation
        assert first["grid"] == again["grid"] != other["grid"]
        assert len(first["grid"].splitlines()) == layout["size"] == 8
        out = httpx.post(f"{url}/grid_world_env/task", json={"split": "test", "index": 99})
        assert out.status_code == 400


def test_chess_puzzles_are_solved_by_their_mating_move() -> None:
    with serve_env("chess_env") as url, GenericEnvClient(url).sync() as env:
        assert env.list_splits() == [{"name": "mate_in_one", "type": "validation"}]
        for i, puzzle in enumerate(env.list_tasks("mate_in_one")):
            env.reset(split="mate_in_one", index=i)
            result = env.step({"move": puzzle["solutions"][0]})
            assert result.done and result.reward == 1.0, puzzle["id"]


def test_an_env_without_tasks_says_so() -> None:
    with (
        serve_env("echo_env") as url,
        GenericEnvClient(url).sync() as env,
        pytest.raises(NoTasksError, match="has no task set"),
    ):
        env.list_splits()
