"""A minimal notebook kernel for the docs tests (standard library only: it runs in any venv).

Reads cells as JSON lines on stdin ({"code", "name", "marker"}) and runs each in one shared
namespace, as a notebook does: top-level `await` works (the cell runs on one event loop that
lives as long as the kernel, so an async client opened in one cell can be used in the next), and
the working folder is importable. After each cell it prints a line `<marker> {"ok": bool}`;
the cell's output (and any traceback) comes before it on stdout.

    python tests/docs/kernel.py
"""

from __future__ import annotations

import ast
import asyncio
import json
import linecache
import sys
import traceback


def main() -> None:
    sys.path.insert(0, "")  # like a notebook or `python -c`: modules of the working folder import
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__}
    loop = asyncio.new_event_loop()
    for line in sys.stdin:
        if not line.strip():
            continue
        cell = json.loads(line)
        ok = _run(cell["code"], cell["name"], namespace, loop)
        sys.stderr.flush()
        print(f"\n{cell['marker']} {json.dumps({'ok': ok})}", flush=True)


def _run(code: str, name: str, namespace: dict[str, object], loop: asyncio.AbstractEventLoop) -> bool:
    linecache.cache[name] = (len(code), None, code.splitlines(keepends=True), name)  # tracebacks show the cell's lines
    try:
        compiled = compile(code, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        result = eval(compiled, namespace)
        if asyncio.iscoroutine(result):
            loop.run_until_complete(result)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            print(f"SystemExit: {exc.code}", file=sys.stderr)
            return False
    except BaseException:
        traceback.print_exc()
        return False
    finally:
        sys.stdout.flush()
    return True


if __name__ == "__main__":
    main()
