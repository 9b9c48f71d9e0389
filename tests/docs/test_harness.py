"""The docs harness itself: what it runs, what makes a block fail, and what it carries between blocks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.docs.harness import Page, Substitutions, expected_prints, output_has, page_run, parse_blocks
from tests.support.servers import ROOT


def _run(tmp_path: Path, markdown: str) -> list[tuple[str, bool, str, str]]:
    page_file = tmp_path / "page.md"
    page_file.write_text(markdown)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    page = Page(page_file, "page.md", tmp_path, env, Substitutions(port_source=lambda: 12345), block_timeout_s=60)
    out = []
    with page_run(page, tmp_path, ROOT) as run:
        for block in run.blocks():
            if (block.lang == "text" and block.directive is None) or block.directive == "skip":
                continue
            result = run.run(block)
            out.append((block.lang, result.ok, result.reason, result.output))
            if not result.ok and block.lang in ("bash", "python"):
                break
    return out


def test_blocks_share_a_terminal_and_a_notebook(tmp_path: Path) -> None:
    results = _run(
        tmp_path,
        """
```bash
mkdir -p sub && cd sub
export GREETING=hello
echo "in $PWD"
```

```python
import os
print(os.getcwd().endswith("sub"), os.environ["GREETING"])   # prints: True hello
counter = 41
```

```python
import asyncio
await asyncio.sleep(0)
counter += 1
print(counter)   # prints: 42
```

```bash
cd ..
```

```python
print("counter" in globals())   # prints: False
```
""",
    )
    assert [r[1] for r in results] == [True] * 5, results


def test_a_failing_command_a_raising_cell_and_a_broken_promise_fail(tmp_path: Path) -> None:
    assert _run(tmp_path, "```bash\ntrue\nfalse\necho never\n```\n")[0][:3] == (
        "bash",
        False,
        "a command failed (exit status 1)",
    )
    assert "ZeroDivisionError" in _run(tmp_path, "```python\n1 / 0\n```\n")[0][3]
    promise = _run(tmp_path, "```python\nprint('hi there')  # prints: hi where\n```\n")[0]
    assert not promise[1] and "hi where" in promise[2]
    assert not _run(tmp_path, '```json\n{"a": 1,}\n```\n')[0][1]


def test_directives(tmp_path: Path) -> None:
    (tmp_path / "code.py").write_text("def f():\n    x = 1\n    return x\n")
    results = _run(
        tmp_path,
        """
<!-- test: excerpt code.py -->
```python
def f():
    ...
    return x
```

<!-- test: file made.txt -->
```text
written
```

<!-- test: skip needs the internet (example.org) -->
```bash
curl https://example.org
```

<!-- test: covered-by .ci/run -->
```bash
bash scripts/test
```

<!-- test: check json:loads -->
```json
[1, 2]
```
""",
    )
    assert [r[1] for r in results] == [True, True, True, True], results
    assert (tmp_path / "made.txt").read_text() == "written\n"
    bad = _run(tmp_path, "<!-- test: excerpt code.py -->\n```python\nreturn y\n```\n")
    assert not bad[0][1] and "has no line" in bad[0][2]
    uncovered = _run(tmp_path, "<!-- test: covered-by .ci/run -->\n```bash\nbash scripts/serve\n```\n")
    assert not uncovered[0][1]


def test_ports_and_names_are_mapped_consistently() -> None:
    ports = iter([20001, 20002])
    subs = Substitutions(port_source=lambda: next(ports), names={"my_env:dev": "docs-my-env:run1"})
    code = "serve --port 8000 & curl http://127.0.0.1:8000/x; bash scripts/serve 7860; localhost:7860 -t my_env:dev app_port: 8000"
    assert subs.apply(code) == (
        "serve --port 20001 & curl http://127.0.0.1:20001/x; bash scripts/serve 20002; localhost:20002 "
        "-t docs-my-env:run1 app_port: 8000"
    )


def test_parsing_fences_directives_and_promises() -> None:
    blocks = parse_blocks(
        "text\n<!-- test: skip needs a GPU -->\n```python\nx = 1\n```\n\n````text\n```\n````\n", "p.md"
    )
    assert [(b.lang, b.line, b.directive, b.argument) for b in blocks] == [
        ("python", 3, "skip", "needs a GPU"),
        ("text", 7, None, ""),
    ]
    with pytest.raises(ValueError, match="not closed"):
        parse_blocks("```bash\necho\n", "p.md")
    assert expected_prints("print(a)  # prints: 1 ... 3\nprint(b)  # just a comment\n") == ["1 ... 3"]
    assert output_has("1  2\n 3", "1 ... 3") and not output_has("3 2 1", "1 ... 3")
