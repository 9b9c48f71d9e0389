"""Lazy package attributes: a package's public names load from their modules on first use.

    _LAZY = {"EnvClient": "openenv.client", ...}           # name → module that defines it
    __getattr__, __dir__ = lazy_attributes(globals(), _LAZY, extras={"openenv.server.app": "server"})

So `import openenv` (or `openenv.training`, `openenv.client.providers`) imports none of them, and a
name whose module needs an extra that is not installed says which one to install. A loaded name is
stored in the package's namespace, so only the first use goes through here. A renamed public name
keeps its old name for one release (`deprecated={"OldName": "NewName"}`): each use of the old name
warns (`warn_renamed`) and gives the new name's value.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes", "warn_renamed"]


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn (DeprecationWarning) that the public name `old` is now `new`; `stacklevel` 3 points at
    the code that used the old name through a module's `__getattr__`."""
    warnings.warn(
        f"{old} is deprecated, use {new}; the alias goes in the next release", DeprecationWarning, stacklevel=stacklevel
    )


def lazy_attributes(
    namespace: dict[str, Any],
    table: Mapping[str, str],
    *,
    extras: Mapping[str, str] | None = None,
    deprecated: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's module-level `__getattr__` and `__dir__` for the names in `table`.

    Args:
        namespace: the package's `globals()` (its `__name__` and `__all__` are read from it).
        table: public name → the module that defines it.
        extras: module → the extra of openenv-hub that module needs; a missing third-party
            module then raises ModuleNotFoundError saying `pip install 'openenv-hub[EXTRA]'`.
        deprecated: old public name → the name in `table` it was renamed to; the old name warns
            at each use and is never stored in the namespace (nor listed by `__dir__`).
    """
    package = namespace["__name__"]
    needs = dict(extras or {})
    renamed = dict(deprecated or {})

    def __getattr__(name: str) -> Any:
        if name in renamed:
            new = renamed[name]
            warn_renamed(name, new)
            return namespace[new] if new in namespace else __getattr__(new)
        module_name = table.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            extra = needs.get(module_name)
            if extra and exc.name and not exc.name.startswith("openenv"):
                raise ModuleNotFoundError(
                    f"{package}.{name} needs the '{extra}' extra ({exc.name} is missing): "
                    f"pip install 'openenv-hub[{extra}]'",
                    name=exc.name,
                ) from exc
            raise
        value = getattr(module, name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
