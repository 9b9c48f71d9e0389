"""The stand-in Hub, driven by the real huggingface_hub client over HTTP (no patching)."""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

from tests.support.hf_hub import HubStandIn


def _api(hub: HubStandIn, token: str | None = None) -> HfApi:
    return HfApi(endpoint=hub.url, token=token or hub.token)


def test_listing_pages_through_link_headers_and_counts_requests(tmp_path: Path) -> None:
    with HubStandIn(tmp_path / "hub", page_size=10) as hub:
        hub.create_spaces(
            {"repo_id": f"org{i % 3}/env_{i:03d}", "tags": ["openenv"] if i % 5 else ["other"]} for i in range(35)
        )
        hub.reset_requests()
        ids = [s.id for s in _api(hub).list_spaces()]
        assert len(ids) == 35 and len(set(ids)) == 35
        assert hub.request_count("GET", "/api/{kind}") == 4  # pages of 10
        page = httpx.get(f"{hub.url}/api/spaces", params={"filter": "openenv"})
        assert len(page.json()) == 10 and 'rel="next"' in page.headers["link"]
        nxt = httpx.get(page.links["next"]["url"])
        assert len(nxt.json()) == 10 and nxt.json()[0]["id"] != page.json()[0]["id"]


def test_filter_search_author_limit_and_expand(hf_hub: HubStandIn) -> None:
    hf_hub.create_space("alice/chess_env", tags=["openenv", "games"], stage="SLEEPING", likes=3)
    hf_hub.create_space("alice/notes", tags=["other"])
    hf_hub.create_space("bob/chess_coach", tags=["openenv"], extra_tags=["mcp-server"])
    api = _api(hf_hub)
    assert sorted(s.id for s in api.list_spaces(filter="openenv")) == ["alice/chess_env", "bob/chess_coach"]
    assert [s.id for s in api.list_spaces(filter=["openenv", "games"])] == ["alice/chess_env"]
    assert [s.id for s in api.list_spaces(filter="mcp-server")] == ["bob/chess_coach"]
    assert sorted(s.id for s in api.list_spaces(search="CHESS")) == ["alice/chess_env", "bob/chess_coach"]
    assert sorted(s.id for s in api.list_spaces(author="alice")) == ["alice/chess_env", "alice/notes"]
    assert len(list(api.list_spaces(limit=2))) == 2
    [chess] = api.list_spaces(search="chess_env", expand=["runtime", "sha", "cardData", "likes"])
    assert (
        chess.runtime.stage == "SLEEPING"
        and chess.likes == 3
        and chess.sha == hf_hub.space("alice/chess_env").refs["main"]
    )
    raw = httpx.get(f"{hf_hub.url}/api/spaces", params={"search": "notes", "expand": ["sdk"]}).json()
    assert raw == [{"_id": hf_hub.space("alice/notes").mongo_id, "id": "alice/notes", "sdk": "docker"}]
    short = httpx.get(f"{hf_hub.url}/api/spaces", params={"search": "notes"}).json()[0]
    assert set(short) == {"_id", "id", "likes", "trendingScore", "private", "sdk", "tags", "createdAt"}


def test_space_info_runtime_and_domains(hf_hub: HubStandIn) -> None:
    sha = "a" * 40
    hf_hub.create_space(
        "alice/echo_env",
        files={"openenv.yaml": "name: echo_env\n"},
        sha=sha,
        stage="SLEEPING",
        domains=["127.0.0.1:8123"],
    )
    api = _api(hf_hub)
    info = api.space_info("alice/echo_env")
    assert info.sha == sha and info.subdomain == "alice-echo-env" and info.sdk == "docker"
    assert {s.rfilename for s in info.siblings} == {".gitattributes", "README.md", "openenv.yaml"}
    assert "openenv" in info.tags and info.card_data.sdk == "docker"
    runtime = api.get_space_runtime("alice/echo_env")
    assert runtime.stage == "SLEEPING" and runtime.raw["domains"] == [{"domain": "127.0.0.1:8123", "stage": "READY"}]
    hf_hub.set_runtime("alice/echo_env", stage="RUNNING", hardware="t4-small")
    runtime = api.get_space_runtime("alice/echo_env")
    assert (runtime.stage, runtime.hardware, runtime.requested_hardware) == ("RUNNING", "t4-small", "t4-small")
    with pytest.raises(ValueError, match="stage must be one of"):
        hf_hub.set_runtime("alice/echo_env", stage="ASLEEP")


def test_a_restart_wakes_a_space_as_its_wake_plan_says_and_only_its_owner_may_ask(hf_hub: HubStandIn) -> None:
    hf_hub.create_space("alice/echo_env", stage="SLEEPING")
    api = _api(hf_hub)
    assert api.restart_space("alice/echo_env").stage == "SLEEPING"  # no plan: accepted, and it sleeps on
    time.sleep(0.3)
    assert api.get_space_runtime("alice/echo_env").stage == "SLEEPING"
    hf_hub.wake_plan("alice/echo_env", [("APP_STARTING", 0.0), ("RUNNING", 0.4)])
    api.restart_space("alice/echo_env")
    seen = []
    deadline = time.monotonic() + 10
    while (not seen or seen[-1] != "RUNNING") and time.monotonic() < deadline:
        stage = api.get_space_runtime("alice/echo_env").stage
        if not seen or seen[-1] != stage:
            seen.append(stage)
        time.sleep(0.05)
    assert seen[-2:] == ["APP_STARTING", "RUNNING"]
    with pytest.raises(HfHubHTTPError) as refused:
        _api(hf_hub, hf_hub.add_user("bob")).restart_space("alice/echo_env")
    assert refused.value.response.status_code == 403
    with pytest.raises(ValueError, match="stage must be one of"):
        hf_hub.wake_plan("alice/echo_env", [("AWAKE", 0.0)])


def test_revisions_trees_and_downloads(hf_hub: HubStandIn, tmp_path: Path) -> None:
    hf_hub.create_space("alice/env", files={"server/app.py": "v = 1\n", "a.txt": "a"})
    first = hf_hub.space("alice/env").refs["main"]
    api = _api(hf_hub)
    second = api.create_commit(
        "alice/env",
        repo_type="space",
        commit_message="v2",
        operations=[CommitOperationAdd("server/app.py", b"v = 2\n"), CommitOperationDelete("a.txt")],
    )
    cache = tmp_path / "cache"
    old = hf_hub_download(
        "alice/env",
        "server/app.py",
        repo_type="space",
        revision=first,
        endpoint=hf_hub.url,
        token=hf_hub.token,
        cache_dir=cache,
    )
    new = hf_hub_download(
        "alice/env", "server/app.py", repo_type="space", endpoint=hf_hub.url, token=hf_hub.token, cache_dir=cache
    )
    assert Path(old).read_text() == "v = 1\n" and Path(new).read_text() == "v = 2\n"
    assert {e.path for e in api.list_repo_tree("alice/env", repo_type="space", revision=first)} == {
        ".gitattributes",
        "README.md",
        "a.txt",
        "server",
    }
    assert {e.path for e in api.list_repo_tree("alice/env", repo_type="space", recursive=True)} == {
        ".gitattributes",
        "README.md",
        "server",
        "server/app.py",
    }
    assert [c.commit_id for c in api.list_repo_commits("alice/env", repo_type="space")][:2] == [second.oid, first]
    with pytest.raises(RevisionNotFoundError):
        api.list_repo_tree("alice/env", repo_type="space", revision="nope-branch").__iter__().__next__()
    with pytest.raises(HfHubHTTPError) as info:
        api.create_commit(
            "alice/env",
            repo_type="space",
            commit_message="stale",
            parent_commit=first,
            operations=[CommitOperationAdd("b.txt", b"b")],
        )
    assert info.value.response.status_code == 412


def test_pull_requests_comments_status_and_merge(hf_hub: HubStandIn) -> None:
    hf_hub.create_space("alice/env", files={"openenv.yaml": "name: env\nport: 8000\n"})
    bob = hf_hub.add_user("bob")
    api, as_bob = _api(hf_hub), _api(hf_hub, bob)
    pr = as_bob.create_commit(
        "alice/env",
        repo_type="space",
        commit_message="Use port 9000",
        create_pr=True,
        operations=[CommitOperationAdd("openenv.yaml", b"name: env\nport: 9000\n")],
    )
    assert pr.pr_url.endswith("/discussions/1") and pr.pr_revision == "refs/pr/1"
    assert hf_hub.files("alice/env")["openenv.yaml"].endswith(b"8000\n")
    assert hf_hub.files("alice/env", "refs/pr/1")["openenv.yaml"].endswith(b"9000\n")
    comment = api.comment_discussion("alice/env", 1, "validation: 3 warnings", repo_type="space")
    edited = api.edit_discussion_comment("alice/env", 1, comment.id, "validation: pass", repo_type="space")
    assert edited.content == "validation: pass" and edited.edited
    with pytest.raises(HfHubHTTPError) as info:
        as_bob.edit_discussion_comment("alice/env", 1, comment.id, "hijack", repo_type="space")
    assert info.value.response.status_code == 403
    details = api.get_discussion_details("alice/env", 1, repo_type="space")
    assert details.is_pull_request and details.target_branch == "refs/heads/main" and "openenv.yaml" in details.diff
    assert [e.type for e in details.events] == ["comment", "commit", "comment"]
    api.merge_pull_request("alice/env", 1, repo_type="space")
    assert hf_hub.files("alice/env")["openenv.yaml"].endswith(b"9000\n")
    assert api.get_discussion_details("alice/env", 1, repo_type="space").status == "merged"
    d = as_bob.create_discussion("alice/env", "Question", repo_type="space")
    api.change_discussion_status("alice/env", d.num, "closed", repo_type="space", comment="answered")
    assert [x.status for x in api.get_repo_discussions("alice/env", repo_type="space")] == ["closed", "merged"]


def test_discussion_listing_pages(hf_hub: HubStandIn) -> None:
    hf_hub.create_space("alice/busy")
    for i in range(60):
        hf_hub.open_discussion("alice/busy", f"d{i}")
    found = list(_api(hf_hub).get_repo_discussions("alice/busy", repo_type="space"))
    assert len(found) == 60 and found[0].title == "d59"
    assert hf_hub.request_count("GET", "/api/{kind}/{owner}/{name}/discussions") == 2


def test_permissions_and_private_repos(hf_hub: HubStandIn) -> None:
    hf_hub.create_space("alice/secret_env", private=True)
    bob, reader = hf_hub.add_user("bob"), hf_hub.add_user("carol", role="read")
    assert _api(hf_hub).space_info("alice/secret_env").private
    with pytest.raises(RepositoryNotFoundError):
        _api(hf_hub, bob).space_info("alice/secret_env")
    assert [s.id for s in _api(hf_hub, bob).list_spaces()] == []
    with pytest.raises(HfHubHTTPError) as info:
        _api(hf_hub, bob).create_repo("alice/intruder", repo_type="space", space_sdk="docker")
    assert info.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as info:
        _api(hf_hub, reader).create_repo("carol/x", repo_type="space", space_sdk="docker")
    assert info.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as info:
        _api(hf_hub, "hf_not_a_token").whoami()
    assert info.value.response.status_code == 401
    assert _api(hf_hub).whoami()["orgs"][0]["name"] == "openenv-org"
    _api(hf_hub).create_repo("openenv-org/shared", repo_type="space", space_sdk="docker")  # member of the org


def test_variables_secrets_duplicate_and_delete(hf_hub: HubStandIn) -> None:
    hf_hub.create_space("bob/source", files={"Dockerfile": "FROM python\n"}, variables={"LEVEL": "1"})
    api = _api(hf_hub)
    api.create_repo("alice/mine", repo_type="space", space_sdk="docker")
    api.add_space_variable("alice/mine", "LEVEL", "3")
    api.add_space_secret("alice/mine", "KEY", "s3cret")
    mine = hf_hub.space("alice/mine")
    assert mine.variables["LEVEL"]["value"] == "3" and mine.secrets["KEY"]["value"] == "s3cret"
    assert (
        "s3cret"
        not in httpx.get(
            f"{hf_hub.url}/api/spaces/alice/mine/secrets", headers={"authorization": f"Bearer {hf_hub.token}"}
        ).text
    )
    api.duplicate_repo("bob/source", "alice/copy", repo_type="space", space_variables=[{"key": "MODE", "value": "x"}])
    copy = hf_hub.space("alice/copy")
    assert hf_hub.files("alice/copy")["Dockerfile"] == b"FROM python\n" and copy.variables["MODE"]["value"] == "x"
    assert api.get_space_runtime("alice/copy").stage == "RUNNING"
    api.delete_repo("alice/copy", repo_type="space")
    with pytest.raises(RepositoryNotFoundError):
        api.space_info("alice/copy")


def test_the_data_survives_a_restart(tmp_path: Path) -> None:
    with HubStandIn(tmp_path / "hub") as hub:
        hub.create_space("alice/kept", files={"x.txt": "1"}, stage="PAUSED")
        hub.open_discussion("alice/kept", "still here?")
        head = hub.space("alice/kept").refs["main"]
    with HubStandIn(tmp_path / "hub") as again:
        api = _api(again)
        info = api.space_info("alice/kept")
        assert info.sha == head and info.runtime.stage == "PAUSED"
        assert [d.title for d in api.get_repo_discussions("alice/kept", repo_type="space")] == ["still here?"]
        assert again.files("alice/kept")["x.txt"] == b"1"


def test_the_oldest_huggingface_hub_1x_client_works_too(hf_hub: HubStandIn, hf1_python: str, tmp_path: Path) -> None:
    hf_hub.create_space("bob/source", files={"Dockerfile": "FROM python\n"})
    script = textwrap.dedent("""
        import json, pathlib, sys
        import huggingface_hub as h
        api = h.HfApi()
        out = {"version": h.__version__, "me": api.whoami()["name"]}
        api.create_repo("alice/one", repo_type="space", space_sdk="docker")
        src = pathlib.Path(sys.argv[1]); (src / "server").mkdir(parents=True)
        (src / "README.md").write_text("---\\nsdk: docker\\ntags: [openenv]\\n---\\n")
        (src / "server" / "app.py").write_text("x = 1\\n")
        out["commit"] = api.upload_folder(repo_id="alice/one", repo_type="space", folder_path=src).oid
        (src / "server" / "app.py").write_text("x = 2\\n")
        pr = api.upload_folder(repo_id="alice/one", repo_type="space", folder_path=src, create_pr=True)
        out["pr"] = [pr.pr_revision, pr.pr_num]
        out["tree"] = sorted(f.path for f in api.list_repo_tree("alice/one", repo_type="space", recursive=True))
        out["pr_file"] = open(h.hf_hub_download("alice/one", "server/app.py", repo_type="space", revision=pr.pr_revision,
                                                cache_dir=str(src / "cache"))).read()
        out["dup"] = str(api.duplicate_space("bob/source", "alice/two"))
        out["listed"] = sorted(s.id for s in api.list_spaces(filter="openenv", expand=["runtime"]))
        print(json.dumps(out))
    """)
    env = {"PATH": "/usr/bin:/bin", **hf_hub.client_env(hf_home=tmp_path / "hf-home")}
    proc = subprocess.run(
        [hf1_python, "-c", script, str(tmp_path / "src")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["version"].startswith("1.") and out["me"] == "alice"
    assert out["pr"] == ["refs/pr/1", 1] and out["pr_file"] == "x = 2\n"
    assert out["tree"] == [".gitattributes", "README.md", "server", "server/app.py"]
    assert out["dup"].endswith("/spaces/alice/two") and hf_hub.files("alice/two")["Dockerfile"] == b"FROM python\n"
    assert out["listed"] == ["alice/one", "alice/two", "bob/source"]
    assert hf_hub.files("alice/one")["server/app.py"] == b"x = 1\n"


def _git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "GIT_TERMINAL_PROMPT": "0", "HOME": str(cwd or "/nonexistent")},
    )


def test_git_clones_a_space_over_smart_http_and_follows_new_commits(hf_hub: HubStandIn, tmp_path: Path) -> None:
    hf_hub.create_space("alice/echo_env", files={"openenv.yaml": "name: echo_env\n", "server/app.py": "x = 1\n"})
    hf_hub.commit("alice/echo_env", {"server/app.py": "x = 2\n"}, message="second")
    clone = tmp_path / "clone"
    assert _git("clone", "-q", f"{hf_hub.url}/spaces/alice/echo_env", str(clone)).returncode == 0
    assert (clone / "server" / "app.py").read_text() == "x = 2\n" and (clone / "openenv.yaml").is_file()
    log = _git("log", "--format=%s|%an", cwd=clone).stdout.splitlines()
    assert log == ["second|alice", "seed|alice", "initial commit|alice"], log
    assert hf_hub.request_count("GET", "/spaces/{owner}/{name}/info/refs") == 1

    hf_hub.commit("alice/echo_env", {"server/app.py": "x = 3\n"}, message="third")
    assert _git("pull", "-q", cwd=clone).returncode == 0
    assert (clone / "server" / "app.py").read_text() == "x = 3\n"
    # a pull request's ref, and the `.git` spelling of the URL
    hf_hub.open_discussion("alice/echo_env", "try", pull_request=True)
    hf_hub.commit("alice/echo_env", {"server/app.py": "x = 4\n"}, branch="refs/pr/1")
    pr = tmp_path / "pr"
    assert _git("clone", "-q", f"{hf_hub.url}/spaces/alice/echo_env.git", str(pr)).returncode == 0
    assert _git("fetch", "-q", "origin", "refs/pr/1", cwd=pr).returncode == 0
    assert _git("show", "FETCH_HEAD:server/app.py", cwd=pr).stdout == "x = 4\n"


def test_git_needs_the_token_for_a_private_space_and_refuses_pushes(hf_hub: HubStandIn, tmp_path: Path) -> None:
    hf_hub.create_space("alice/secret_env", private=True, files={"a.txt": "hidden"})
    anonymous = _git("clone", "-q", f"{hf_hub.url}/spaces/alice/secret_env", str(tmp_path / "a"))
    assert anonymous.returncode != 0 and not (tmp_path / "a" / "a.txt").exists()
    with_token = hf_hub.url.replace("http://", f"http://alice:{hf_hub.token}@")
    clone = tmp_path / "b"
    assert _git("clone", "-q", f"{with_token}/spaces/alice/secret_env", str(clone)).returncode == 0
    assert (clone / "a.txt").read_text() == "hidden"
    (clone / "a.txt").write_text("changed")
    _git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qam", "change", cwd=clone)
    pushed = _git("push", "-q", "origin", "main", cwd=clone)
    assert (
        pushed.returncode != 0 and "403" in pushed.stderr
    )  # git shows the status, not the stand-in's "read-only" message
    assert hf_hub.files("alice/secret_env")["a.txt"] == b"hidden"
