"""Running a documentation page: every fenced code block, in order, the way a reader would.

A page runs in one terminal (a persistent bash: `cd`, `export`, `source .venv/bin/activate` and
background servers carry over from block to block) and one notebook (`kernel.py`: Python cells
share their namespace and event loop; the kernel starts in the terminal's current folder and
environment, and starts again when a block changed them, as you would restart a notebook in a
new venv).

Languages: `bash`/`sh`/`shell` run in the terminal, `python`/`py` in the notebook, `json`,
`yaml` and `toml` must parse, `text` is not code (output, trees, wire transcripts). A fence
without a language is an error. An HTML comment on the line before a fence can say more:

    <!-- test: skip needs the internet (github.com) -->   not run; the reason must name the
                                                           internet or a GPU
    <!-- test: check MODULE:ATTR -->       a json/yaml/toml block is passed (as text) to this callable
    <!-- test: file PATH -->               the block is written to PATH (relative to the terminal's folder)
    <!-- test: excerpt PATH -->            the block's lines appear, in order, in PATH
    <!-- test: covered-by TESTFILE -->     the block's commands are run by that test (it must contain them)

In Python cells, `print(...)  # prints: TEXT` asserts that TEXT (with `...` matching anything)
is in the cell's output. Ports on 127.0.0.1 and a few names are mapped to free/unique ones per
run (`Substitutions`), so pages can say `--port 8000` and still run beside other tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "Page", "PageRun", "Substitutions", "parse_blocks"]

KERNEL = Path(__file__).with_name("kernel.py")
SHELL_LANGS = frozenset({"bash", "sh", "shell"})
PYTHON_LANGS = frozenset({"python", "py"})
DATA_LANGS = frozenset({"json", "yaml", "toml"})
TEXT_LANGS = frozenset({"text"})
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>.*)$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*test:\s*(?P<kind>[a-z-]+)\s*(?P<arg>.*?)\s*-->\s*$")
_PRINTS = re.compile(r"#\s*prints:\s*(?P<text>.+?)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: str
    line: int
    lang: str
    code: str
    directive: str | None = None
    argument: str = ""

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def parse_blocks(text: str, page: str) -> list[Block]:
    """The fenced blocks of a Markdown page, with the directive on the line before each.

    Raises:
        ValueError: a fence is not closed.
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m["indent"]), m["fence"], m["info"].strip()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not (
            lines[i].strip() == fence and len(lines[i]) - len(lines[i].lstrip()) <= indent + 3
        ):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i >= len(lines):
            raise ValueError(f"{page}:{start + 1}: the code fence is not closed")
        i += 1
        directive, argument = None, ""
        before = start - 1
        if before >= 0 and (d := _DIRECTIVE.match(lines[before])):
            directive, argument = d["kind"], d["arg"]
        blocks.append(
            Block(page, start + 1, info.split()[0].lower() if info else "", "\n".join(body) + "\n", directive, argument)
        )
    return blocks


def expected_prints(code: str) -> list[str]:
    """The `# prints: TEXT` promises of a Python cell."""
    return [m["text"] for line in code.splitlines() if (m := _PRINTS.search(line))]


def output_has(output: str, expected: str) -> bool:
    """Whether `expected` (where `...` matches anything) occurs in `output`, whitespace-insensitively."""
    flat = " ".join(output.split())
    parts = [re.escape(" ".join(p.split())) for p in expected.split("...")]
    return re.search(r".*?".join(parts), flat) is not None


@dataclass
class Substitutions:
    """What the page says → what this run uses: ports on 127.0.0.1 and names that must be unique."""

    ports: dict[int, int] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    port_source: Callable[[], int] | None = None

    def apply(self, code: str) -> str:
        def port(m: re.Match[str]) -> str:
            wanted = int(m["port"])
            if wanted not in self.ports:
                assert self.port_source is not None
                self.ports[wanted] = self.port_source()
            return f"{m['pre']}{self.ports[wanted]}"

        code = re.sub(r"(?P<pre>(?:127\.0\.0\.1|localhost):|--port[ =]|scripts/serve )(?P<port>\d{4,5})\b", port, code)
        for old, new in self.names.items():
            code = code.replace(old, new)
        return code


class _Output:
    """Everything a process writes, collected by a thread so the process never blocks on its pipe."""

    def __init__(self, stream: object) -> None:
        self.text = ""
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for chunk in iter(lambda: stream.readline(), ""):  # type: ignore[attr-defined]
            with self._cond:
                self.text += chunk
                self._cond.notify_all()
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait_for(self, pattern: re.Pattern[str], start: int, timeout: float) -> re.Match[str] | None:
        """The first match of `pattern` after `start`; None when the stream closed or time ran out."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if (m := pattern.search(self.text, start)) is not None:
                    return m
                left = deadline - time.monotonic()
                if self._closed or left <= 0:
                    return None
                self._cond.wait(min(left, 1.0))


@dataclass
class Result:
    ok: bool
    output: str
    reason: str = ""


class Terminal:
    """A persistent bash session (its own process group); blocks are sourced into it."""

    def __init__(self, cwd: Path, env: dict[str, str], scratch: Path) -> None:
        self.scratch = scratch
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.out = _Output(self.proc.stdout)
        self.state_file = scratch / "terminal-state.json"
        self._count = 0
        started = self.run("", 60)  # records the starting folder and environment
        assert started.ok, started.output

    def run(self, script: str, timeout: float) -> Result:
        """Source `script` with `set -eo pipefail`; then record the folder, environment and python."""
        self._count += 1
        path = self.scratch / f"block-{self._count}.sh"
        path.write_text(script)
        marker = f"@@docs-block-{uuid.uuid4().hex}@@"
        start = len(self.out.text)
        command = (
            f"set -eo pipefail; source {path} </dev/null; set +eo pipefail; "
            f'python3 -c \'import json,os,shutil,sys; json.dump({{"cwd": os.getcwd(), "env": dict(os.environ), '
            f'"python": shutil.which("python") or shutil.which("python3")}}, open(sys.argv[1], "w"))\' {self.state_file}; '
            f"echo; echo {marker} $?\n"
        )
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(command)
            self.proc.stdin.flush()
        except BrokenPipeError:
            return Result(False, self.out.text[start:], "the terminal has exited (an earlier block failed)")
        m = self.out.wait_for(re.compile(re.escape(marker) + r" (\d+)"), start, timeout)
        output = self.out.text[start : m.start() if m else None]
        if m is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)  # the output ends a moment before the exit status is there
            code = self.proc.poll()
            return Result(
                False,
                output,
                f"timed out after {timeout:g} s" if code is None else f"a command failed (exit status {code})",
            )
        return Result(True, output)

    def state(self) -> dict[str, object]:
        return json.loads(self.state_file.read_text())

    def close(self) -> None:
        _stop_group(self.proc)


class Kernel:
    """A notebook kernel (kernel.py) in a given folder, environment and python."""

    def __init__(self, python: str, cwd: str, env: dict[str, str]) -> None:
        self.key = (python, cwd, json.dumps(env, sort_keys=True))
        self.proc = subprocess.Popen(
            [python, str(KERNEL)],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.out = _Output(self.proc.stdout)

    def run(self, code: str, name: str, timeout: float) -> Result:
        marker = f"@@docs-cell-{uuid.uuid4().hex}@@"
        start = len(self.out.text)
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"code": code, "name": name, "marker": marker}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return Result(False, self.out.text[start:], "the notebook kernel has exited")
        m = self.out.wait_for(re.compile(re.escape(marker) + r" (\{.*\})"), start, timeout)
        output = self.out.text[start : m.start() if m else None]
        if m is None:
            return Result(False, output, "timed out" if self.proc.poll() is None else "the notebook kernel died")
        ok = json.loads(m.group(1))["ok"]
        return Result(ok, output, "" if ok else "the cell raised")

    def close(self) -> None:
        if self.proc.stdin is not None and self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)  # the kernel's atexit hooks stop what its cells started
        _stop_group(self.proc)


def _stop_group(proc: subprocess.Popen[str]) -> None:
    """SIGTERM the process group (the process and what it started), then SIGKILL what is left after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(0.1)  # reap the leader, or it lingers as a zombie of the group
            if proc.poll() is not None and not _group_alive(proc.pid):
                return
            time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies do not count)."""
    out = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return any(s.strip() and not s.strip().startswith("Z") for s in out.splitlines())


@dataclass
class Page:
    """A page to run: its file, the folder its terminal starts in, and its environment."""

    path: Path
    name: str
    cwd: Path
    env: dict[str, str]
    subs: Substitutions
    block_timeout_s: float = 600.0


class PageRun:
    """Runs the blocks of one page in order; `close()` stops its terminal and kernel."""

    def __init__(self, page: Page, scratch: Path, *, root: Path) -> None:
        self.page = page
        self.root = root
        self.scratch = scratch
        self.terminal = Terminal(page.cwd, page.env, scratch)
        self.kernel: Kernel | None = None
        self.log: list[str] = []

    def blocks(self) -> list[Block]:
        return parse_blocks(self.page.path.read_text(), self.page.name)

    def run(self, block: Block) -> Result:
        """Run one block; the result says whether it did what the page says (the log says how long
        it took: OPENENV_DOCS_TIMES=FILE also appends `seconds<TAB>where` lines to FILE)."""
        started = time.monotonic()
        try:
            return self._run(block)
        finally:
            took = time.monotonic() - started
            self.log.append(f"    ({block.where} took {took:.1f} s)")
            if os.environ.get("OPENENV_DOCS_TIMES"):
                with open(os.environ["OPENENV_DOCS_TIMES"], "a", encoding="utf-8") as times:
                    times.write(f"{took:.1f}\t{block.where}\n")

    def _run(self, block: Block) -> Result:
        kind = block.directive
        if kind == "covered-by":
            return self._covered_by(block)
        if kind == "excerpt":
            return self._excerpt(block)
        code = self.page.subs.apply(block.code)
        if kind == "file":
            target = self.page.subs.apply(block.argument)
            return self._record(
                block,
                self.terminal.run(
                    f"mkdir -p \"$(dirname {target})\"\ncat > {target} <<'DOCS_FILE_EOF'\n{code}DOCS_FILE_EOF\n",
                    self.page.block_timeout_s,
                ),
            )
        if block.lang in SHELL_LANGS:
            return self._record(block, self.terminal.run(code, self.page.block_timeout_s))
        if block.lang in PYTHON_LANGS:
            return self._record(block, self._python(code, block))
        if block.lang in DATA_LANGS:
            return self._data(block)
        raise AssertionError(f"{block.where}: no way to run a {block.lang!r} block")

    def _record(self, block: Block, result: Result) -> Result:
        self.log.append(
            f"--- {block.where} ({block.lang}) {'ok' if result.ok else 'FAILED: ' + result.reason}\n{result.output[-4000:]}"
        )
        return result

    def _python(self, code: str, block: Block) -> Result:
        state = self.terminal.state()
        env = {str(k): str(v) for k, v in state["env"].items()}  # type: ignore[union-attr]
        for noise in ("_", "SHLVL", "OLDPWD"):
            env.pop(noise, None)
        python, cwd = str(state["python"]), str(state["cwd"])
        key = (python, cwd, json.dumps(env, sort_keys=True))
        if self.kernel is None or self.kernel.key != key:
            if self.kernel is not None:
                self.kernel.close()
            self.kernel = Kernel(python, cwd, env)
        result = self.kernel.run(code, f"<{block.where}>", self.page.block_timeout_s)
        if result.ok:
            missing = [e for e in expected_prints(code) if not output_has(result.output, e)]
            if missing:
                return Result(False, result.output, f"the page says it prints {missing[0]!r}")
        return result

    def _data(self, block: Block) -> Result:
        import importlib
        import tomllib

        import yaml

        text = block.code
        try:
            {"json": json.loads, "yaml": yaml.safe_load, "toml": tomllib.loads}[block.lang](text)
            if block.directive == "check":
                module, _, attr = block.argument.partition(":")
                target: object = importlib.import_module(module)
                for part in attr.split("."):
                    target = getattr(target, part)
                target(text)  # type: ignore[operator]
        except Exception as exc:
            return Result(False, text, f"{type(exc).__name__}: {exc}")
        return Result(True, "")

    def _covered_by(self, block: Block) -> Result:
        files = [self.root / name for name in block.argument.split()]
        if missing_files := [str(f.relative_to(self.root)) for f in files if not f.is_file()]:
            return Result(False, "", f"{', '.join(missing_files)} does not exist")
        sources = [f.read_text() for f in files]
        commands = [
            c.split(" #")[0].strip() for c in block.code.splitlines() if c.strip() and not c.strip().startswith("#")
        ]
        for command in commands:
            words = re.findall(r"[\w./:-]+", command)
            if not any(all(word in source for word in words) for source in sources):
                return Result(False, "", f"none of {block.argument} runs {command!r}")
        return Result(True, "")

    def _excerpt(self, block: Block) -> Result:
        state = self.terminal.state()
        path = Path(str(state["cwd"])) / block.argument
        if not path.is_file():
            return Result(False, "", f"{path} does not exist")
        lines = iter(line.rstrip() for line in path.read_text().splitlines())
        for wanted in (line.rstrip() for line in block.code.splitlines() if line.strip() and line.strip() != "..."):
            if not any(line.strip() == wanted.strip() for line in lines):
                return Result(False, "", f"{block.argument} has no line {wanted.strip()!r} (in this order)")
        return Result(True, "")

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.close()
        self.terminal.close()


@contextlib.contextmanager
def page_run(page: Page, scratch: Path, root: Path) -> Iterator[PageRun]:
    run = PageRun(page, scratch, root=root)
    try:
        yield run
    finally:
        run.close()
