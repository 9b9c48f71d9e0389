"""`@tool`: turn methods of an `Environment` into typed MCP tools.

    class Calculator(Environment[...]):
        @tool
        def add(self, a: int, b: int = 0) -> int:
            \"\"\"Add two integers.

            Args:
                a: the first addend.
                b: the second addend.
            \"\"\"
            return a + b

The tool's JSON Schema comes from the type hints (anything pydantic understands: models,
`Literal`, `Annotated[..., Field(...)]`, optionals) and its descriptions from the docstring
(Google `Args:` sections or reST `:param x:` lines). Arguments are validated against that
schema before the method runs, so a tool body only ever sees well-typed values. A tool runs on
the session's own environment instance, so it can read and change the episode's state.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from openenv.errors import ConfigurationError
from openenv.mcp.types import RESERVED_TOOL_NAMES, Tool

__all__ = ["ToolArgumentsError", "ToolSpec", "tool", "tools_of"]

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__openenv_tool__"
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_ARGS_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_SECTION_RE = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_PARAM_RE = re.compile(r"^(\s+)\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM_RE = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


class ToolArgumentsError(ValueError):
    """The arguments of a tool call do not fit its schema; the message lists each problem."""


@dataclass(frozen=True, slots=True)
class _Options:
    name: str | None
    description: str | None
    timeout_s: float | None


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout_s: float | None = None
) -> Callable[[F], F]: ...


def tool(
    fn: F | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_s: float | None = None,
) -> F | Callable[[F], F]:
    """Mark an environment method (sync or `async def`) as an MCP tool.

    Use bare (`@tool`) or with options (`@tool(name=..., timeout_s=5)`). The method stays an
    ordinary method: calling it directly (e.g. in a unit test) works as before.

    Args:
        name: the tool's name (default: the method's name).
        description: what the tool does (default: the docstring, without its sections).
        timeout_s: the longest a call may run; over it the caller gets a `timeout` error
            (default: the server's `tool_timeout_s`, 30 s).

    Raises:
        ConfigurationError: the name is reserved (reset, step, state, close) or not a valid
            tool name, the timeout is not positive, or the method takes *args or **kwargs.
    """
    if timeout_s is not None and not timeout_s > 0:
        raise ConfigurationError(f"@tool: timeout_s must be > 0 seconds, got {timeout_s!r}")
    if name is not None:
        _check_name(name, "@tool")

    def mark(func: F) -> F:
        if not inspect.isfunction(func):
            raise ConfigurationError(f"@tool decorates a plain method (def or async def), not {func!r}")
        tool_name = name or func.__name__
        _check_name(tool_name, func.__qualname__)
        for param in inspect.signature(func).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigurationError(
                    f"tool {tool_name!r} takes *{param.name}: a tool's arguments must be named parameters with type hints"
                )
        setattr(func, _MARK, _Options(tool_name, description, timeout_s))
        return func

    return mark(fn) if fn is not None else mark


def _check_name(tool_name: str, where: str) -> None:
    if tool_name in RESERVED_TOOL_NAMES:
        raise ConfigurationError(
            f"{where}: a tool may not be called {tool_name!r}; {sorted(RESERVED_TOOL_NAMES)} are the "
            "environment's own API. Rename the method or pass @tool(name=...)"
        )
    if not _NAME_RE.match(tool_name):
        raise ConfigurationError(f"{where}: tool name {tool_name!r} must be 1-128 of A-Z a-z 0-9 _ - .")


@dataclass(slots=True)
class ToolSpec:
    """One tool of an environment class: its name, method and (lazily built) argument model."""

    name: str
    attr: str
    fn: Callable[..., Any]
    owner: type
    description: str
    timeout_s: float | None
    is_async: bool
    _params: list[str] = field(default_factory=list)
    _model: type[BaseModel] | None = None
    _schema: dict[str, Any] | None = None

    @classmethod
    def of(cls, owner: type, attr: str, fn: Callable[..., Any]) -> ToolSpec:
        opts: _Options = getattr(fn, _MARK)
        summary, _ = _parse_docstring(fn.__doc__)
        return cls(
            name=opts.name or attr,
            attr=attr,
            fn=fn,
            owner=owner,
            description=opts.description if opts.description is not None else summary,
            timeout_s=opts.timeout_s,
            is_async=inspect.iscoroutinefunction(fn),
        )

    @property
    def arguments_model(self) -> type[BaseModel]:
        """The pydantic model that validates this tool's arguments (built on first use).

        Raises:
            ConfigurationError: a type hint cannot be resolved or is not one pydantic can check.
        """
        if self._model is None:
            self._model, self._params = _arguments_model(self)
        return self._model

    def input_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments, as `tools/list` shows it."""
        if self._schema is None:
            self._schema = _clean_schema(self.arguments_model.model_json_schema(by_alias=True))
        return self._schema

    def describe(self) -> Tool:
        """The `Tool` entry of `tools/list`."""
        return Tool(name=self.name, description=self.description, input_schema=self.input_schema())

    def validate(self, arguments: Any) -> dict[str, Any]:
        """Check `arguments` against the schema; returns the keyword arguments for the method.

        Raises:
            ToolArgumentsError: not an object, a missing or unknown argument, or a wrong type.
        """
        if not isinstance(arguments, dict):
            raise ToolArgumentsError(f"arguments of {self.name!r} must be an object, got {type(arguments).__name__}")
        model = self.arguments_model
        try:
            parsed = model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(_describe(err) for err in exc.errors(include_url=False))
            raise ToolArgumentsError(f"invalid arguments for {self.name!r}: {problems}") from None
        return {param: getattr(parsed, f"p{i}") for i, param in enumerate(self._params)}


def tools_of(env_cls: type) -> dict[str, ToolSpec]:
    """The tools of an environment class, by tool name (cached per class).

    A subclass inherits its bases' tools; redefining a method without `@tool` removes it.

    Raises:
        ConfigurationError: two methods declare the same tool name.
    """
    cached: dict[str, ToolSpec] | None = env_cls.__dict__.get("_openenv_tool_specs")
    if cached is not None:
        return cached
    found: dict[str, Callable[..., Any]] = {}
    for klass in reversed(env_cls.__mro__):
        for attr, value in vars(klass).items():
            if hasattr(value, _MARK) and inspect.isfunction(value):
                found[attr] = value
            else:
                found.pop(attr, None)
    specs: dict[str, ToolSpec] = {}
    for attr, fn in found.items():
        spec = ToolSpec.of(env_cls, attr, fn)
        if spec.name in specs:
            raise ConfigurationError(
                f"{env_cls.__name__}: methods {specs[spec.name].attr!r} and {attr!r} both declare tool {spec.name!r}"
            )
        specs[spec.name] = spec
    type.__setattr__(env_cls, "_openenv_tool_specs", specs)
    return specs


# -- schema and docstring helpers ---------------------------------------------------------------


def _arguments_model(spec: ToolSpec) -> tuple[type[BaseModel], list[str]]:
    fn = spec.fn
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:  # NameError and friends, from user annotations
        raise ConfigurationError(
            f"cannot resolve the type hints of tool {spec.name!r} ({fn.__qualname__}): {type(exc).__name__}: {exc}; "
            "types used in a tool's signature must be importable from its module"
        ) from None
    _, docs = _parse_docstring(fn.__doc__)
    params = list(inspect.signature(fn).parameters.values())[1:]  # drop self
    fields: dict[str, Any] = {}
    names: list[str] = []
    # Fields get neutral internal names with the parameter name as alias, so a parameter may be
    # called anything (`schema`, `json`, `model_config`) without clashing with BaseModel.
    for i, param in enumerate(params):
        hint = hints.get(param.name, Any)
        extra: dict[str, Any] = {"alias": param.name}
        if param.name in docs and not _described(hint):
            extra["description"] = docs[param.name]
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[f"p{i}"] = (hint, Field(default, **extra))
        names.append(param.name)
    try:
        model = create_model(
            f"{spec.owner.__name__}.{spec.name}.arguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=False, arbitrary_types_allowed=False),
            **fields,
        )
        model.model_json_schema(by_alias=True)
    except Exception as exc:  # pydantic's schema errors for types it cannot describe
        raise ConfigurationError(
            f"tool {spec.name!r} ({fn.__qualname__}) has an argument type pydantic cannot describe: {exc}"
        ) from None
    return model, names


def _described(hint: Any) -> bool:
    """Whether an `Annotated[..., Field(description=...)]` hint already carries a description."""
    if typing.get_origin(hint) is not typing.Annotated:
        return False
    return any(getattr(meta, "description", None) for meta in typing.get_args(hint)[1:])


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop the titles pydantic derives from names (noise for an agent), keep everything else."""
    schema.pop("title", None)
    for name, prop in schema.get("properties", {}).items():
        if isinstance(prop, dict) and prop.get("title") == name.replace("_", " ").title():
            del prop["title"]
    return schema


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into the description (before any section) and per-parameter texts."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None
    for line in lines:
        rest = _REST_PARAM_RE.match(line.strip())
        if rest:
            section, current = "rest", rest.group(1)
            params[current] = rest.group(2).strip()
            continue
        heading = _SECTION_RE.match(line)
        if heading and not line[:1].isspace():
            section, current, indent = heading.group(1).strip().lower(), None, None
            continue
        if section is None:
            summary.append(line)
            continue
        if line.strip().startswith(":"):  # another reST field (:returns:, :raises:)
            current = None
            continue
        match = _PARAM_RE.match(line) if section in _ARGS_SECTIONS else None
        if match and (indent is None or len(match.group(1)) <= indent):
            indent = len(match.group(1))
            current = match.group(2)
            params[current] = match.group(3).strip()
        elif current is not None and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), params


def _describe(err: Any) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ()))
    if err.get("type") == "extra_forbidden":
        return f"unknown argument {loc!r}"
    return f"{loc or '<arguments>'}: {err.get('msg', '')}"
