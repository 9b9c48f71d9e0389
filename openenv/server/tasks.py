"""The Task API (upstream OpenEnv 0.10.0's routes, served the same way): an environment with a
natural set of tasks lists its splits and tasks, and `reset(split=..., index=...)` picks one.

    GET  /list_environments                         ["<name>"]
    GET  /<name>/splits                             [{"name": "train", "type": "train"}, ...]
    POST /<name>/tasks       {"split"}              {"tasks": [...], "env_name": "<name>"}
    POST /<name>/num_tasks   {"split"}              {"num_tasks": n}
    POST /<name>/task        {"split", "index"}     {"task": ...}
    POST /<name>/task_range  {"split", "start"?, "stop"?}   {"tasks": [...]}

The name matches case-insensitively. Each call builds a fresh environment (as the stateless HTTP
routes do) and closes it. An environment without tasks answers 501 with what is missing; an
unknown split 404 with the splits there are (upstream answers a bare 500); a task index out of
range 400.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict
from pydantic_core import to_jsonable_python

from openenv.env import AnyEnvironment
from openenv.errors import NoTasksError

if TYPE_CHECKING:
    from openenv.server.runtime import EnvRuntime

__all__ = ["add_task_routes", "split_entry"]

_KNOWN_TYPES = ("train", "validation", "test")


class _SplitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    split: str


class _TaskBody(_SplitBody):
    index: int


class _RangeBody(_SplitBody):
    start: int | None = None
    stop: int | None = None


def split_entry(split: Any) -> Any:
    """A split as the wire shows it: `{"name", "type"}` for a name (type: train, validation or
    test when the name is one, else validation), a mapping as it is, a model dumped."""
    if isinstance(split, str):
        return {"name": split, "type": split if split in _KNOWN_TYPES else "validation"}
    if isinstance(split, BaseModel):
        return split.model_dump(mode="json")
    if isinstance(split, dict):
        return split
    return {"name": str(split), "type": "validation"}


def add_task_routes(app: FastAPI, runtime: EnvRuntime, name: str) -> None:
    """Add the Task API routes for the environment `name` served by `runtime`."""

    def known(env_name: str) -> None:
        if env_name.lower() != name.lower():
            raise HTTPException(
                404, f"unknown environment {env_name!r}; this server serves {name!r} (GET /list_environments)"
            )

    async def call(method: str, *args: Any) -> Any:
        async with runtime.fresh_env() as env:
            bound = getattr(env, method)
            try:
                value = await runtime.sessions.executor.run(type(env), method, bound, *args)
                if hasattr(value, "__await__"):
                    value = await value
            except NoTasksError as exc:
                raise HTTPException(501, str(exc)) from None
            except NotImplementedError:
                raise HTTPException(501, f"{method} is not supported for this environment") from None
            except KeyError as exc:
                raise HTTPException(404, _unknown_split(env, args[0] if args else None, exc)) from None
            except IndexError:
                raise HTTPException(
                    400, "Invalid task index: it is outside the split (POST /<env>/num_tasks says how many)"
                ) from None
        return to_jsonable_python(value, fallback=str)

    @app.get("/list_environments", tags=["Tasks"], summary="The environments this server serves (one)")
    async def list_environments() -> list[str]:
        return [name]

    @app.get("/{env_name}/splits", tags=["Tasks"], summary="The environment's task splits")
    async def splits(env_name: str) -> list[Any]:
        known(env_name)
        return [split_entry(s) for s in await call("list_splits")]

    @app.post("/{env_name}/tasks", tags=["Tasks"], summary="Every task of a split")
    async def tasks(env_name: str, body: _SplitBody) -> dict[str, Any]:
        known(env_name)
        return {"tasks": await call("list_tasks", body.split), "env_name": name}

    @app.post("/{env_name}/num_tasks", tags=["Tasks"], summary="How many tasks a split has")
    async def num_tasks(env_name: str, body: _SplitBody) -> dict[str, Any]:
        known(env_name)
        return {"num_tasks": await call("num_tasks", body.split)}

    @app.post("/{env_name}/task", tags=["Tasks"], summary="One task of a split, by index")
    async def task(env_name: str, body: _TaskBody) -> dict[str, Any]:
        known(env_name)
        return {"task": await call("get_task", body.split, body.index)}

    @app.post("/{env_name}/task_range", tags=["Tasks"], summary="A slice of a split's tasks")
    async def task_range(env_name: str, body: _RangeBody) -> dict[str, Any]:
        known(env_name)
        return {"tasks": await call("get_task_range", body.split, body.start, body.stop)}


def _unknown_split(env: AnyEnvironment, split: Any, exc: KeyError) -> str:
    try:
        names = [split_entry(s).get("name", s) for s in env.list_splits()]
    except Exception:  # the env cannot list them either: say what it raised
        return f"unknown split {split!r} ({exc})"
    return f"unknown split {split!r}; this environment has {', '.join(map(str, names)) or 'none'}"
