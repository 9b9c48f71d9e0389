"""One notion of an env's port, read as a Space reads it: the manifest's `port`, else the README
front matter's `app_port`, else 8000 — what smoke tests, play, resolve records and providers use."""

from __future__ import annotations

from pathlib import Path

from openenv.manifest import env_port


def test_manifest_port_then_app_port_then_8000(tmp_path: Path) -> None:
    assert env_port(tmp_path) == 8000
    (tmp_path / "README.md").write_text(
        "---\ntitle: Demo\nsdk: docker\napp_port: 7860\n---\n# Demo\n\napp_port: 9999\n"
    )
    assert env_port(tmp_path) == 7860  # from the front matter, not the body
    (tmp_path / "openenv.yaml").write_text("spec_version: 1\nname: demo\napp: server.app:app\n")
    assert env_port(tmp_path) == 7860  # the manifest sets none: the README decides
    (tmp_path / "openenv.yaml").write_text("spec_version: 1\nname: demo\nport: 8004\n")
    assert env_port(tmp_path) == 8004


def test_unusable_values_are_passed_over(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("---\napp_port: '8080'\n---\n")
    for bad in ("port: yes\n", "port: http\n", "port: 70000\n", "port: [8000]\n", "port: {a\n"):
        (tmp_path / "openenv.yaml").write_text("name: demo\n" + bad)
        assert env_port(tmp_path) == 8080, bad
    (tmp_path / "README.md").write_text("no front matter\napp_port: 9000\n")
    assert env_port(tmp_path) == 8000
