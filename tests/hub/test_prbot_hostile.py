"""Issue 22 (slice D, item 1): a hostile Space's text reaches the pull-request comment inert. What a
Space controls (its manifest's values echoed by validation, build and smoke errors) renders as
text: no links, images, HTML or @mentions of its making, and no address of the Hub's machine."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from hub_service.prbot.comment import ReportView, render
from tests.hub.live import Live, env_files

REPO = "alice/bad_manifest"
EVIL = (
    "@bob ![pixel](https://evil.example/p.png) <img src=x onerror=alert(1)> [click me](https://evil.example/phish) "
    "<a href='https://evil.example'>x</a> ``` `break` out www.evil.example https://evil.example/raw"
)
INTERNAL = "http://127.0.0.1:49153/reset, container 172.17.0.5:8000, http://localhost:7860/x, [::1]:9000"


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(markdown)


def _assert_inert(markdown: str, allowed_links: tuple[str, ...] = ()) -> None:
    html = _html(markdown)
    links = re.findall(r"<a href=\"([^\"]*)\"", html)
    assert all(link.startswith(allowed_links) for link in links) if allowed_links else links == [], links
    assert "<img" not in html and "onerror" not in html.replace("onerror=alert", "")  # no image, no live attribute
    ours = re.sub(r"<a href=\"[^\"]*\">(Full report|log of the failing stage)</a>", "", html)
    assert not re.search(r"<(img|a|script|b)\b", ours), html  # raw HTML is escaped text
    assert "@bob" not in markdown  # the mention is broken (a word joiner follows the @)
    assert not re.search(r"https?://evil", markdown) and "www.evil" not in markdown  # no bare URL to linkify
    assert "evil.example" in html  # ... yet the text is there to read


def test_a_hostile_failure_renders_as_text_without_internal_addresses() -> None:
    view = ReportView(
        repo_id=REPO,
        num=3,
        pr_status="open",
        sha="0123456789abcdef0123",
        state="failed",
        report_url="http://127.0.0.1:7860/api/v1/envs/alice/bad_manifest/versions/0123456789abcdef0123",
        validation={
            "checks": [
                {
                    "id": f"x`{EVIL}",
                    "status": "fail",
                    "message": f"{EVIL} {INTERNAL}",
                    "remediation": EVIL,
                    "file": EVIL,
                    "line": "<b>7</b>",
                },
                {"id": "package.pyproject", "status": "warn", "message": EVIL, "remediation": EVIL},
            ]
        },
        validation_status="fail",
        failure_stage="smoke",
        failure_reason=f"POST {INTERNAL} said:\n```\n{EVIL}\n```",
        log_url="http://127.0.0.1:7860/logs/smoke",
    )
    text = render(view)
    _assert_inert(text)
    for address in ("127.0.0.1", "localhost", "172.17.0.5", "::1", "49153", "7860"):
        assert address not in text, address
    assert "[internal address]" in text and "this Hub has no public address" in text


def test_the_bot_comments_a_hostile_pull_request_inertly(live: Live) -> None:
    live.publish(REPO, env_files("bad_manifest"))
    live.work()
    manifest = f"spec_version: 1\nname: {EVIL!r}\ntype: space\nruntime: fastapi\napp: {INTERNAL!r}\nport: 8000\n"
    num, head = live.open_pr(REPO, env_files("bad_manifest", **{"openenv.yaml": manifest}))
    assert "failed" in live.work()
    [comment] = live.bot_comments(REPO, num)
    text = comment.content
    assert f"failed for `{head[:12]}`" in text and "manifest.schema" in text
    _assert_inert(text, allowed_links=("https://hub.example.org/",))
    assert "127.0.0.1" not in text and "172.17.0.5" not in text
