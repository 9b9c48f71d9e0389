"""Webhooks keep the catalog live: pushes, deletes and moves on the (stand-in) Hub reach the
catalog through `/webhooks/hf` and the jobs it queues; forged, malformed, replayed, duplicated and
out-of-order deliveries are refused or change nothing."""

from __future__ import annotations

import copy

import httpx
from sqlalchemy import select

from hub_service.audit.models import EnvEvent
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.queue.models import Job
from hub_service.webhooks.models import WebhookDelivery
from tests.hub.live import SECRET, Live, env_files


def _events(live: Live, repo_id: str) -> list[dict]:
    return httpx.get(f"{live.url}/api/v1/envs/{repo_id}/events").json()["items"]


def test_a_push_to_main_indexes_the_new_sha(live: Live) -> None:
    first = live.publish("alice/echo_env", env_files("echo_env"))
    assert live.tasks() == ["done"]  # the create and the push coalesce into one index job
    env = live.env("alice/echo_env")
    assert env is not None and env.sha == first and env.source == "hf" and env.status == "pending"
    with live.factory() as s:
        version = s.scalar(select(EnvVersion).where(EnvVersion.env_id == env.id))
        job = s.scalar(select(Job).where(Job.version_id == version.id))
    assert (version.sha, version.ref, job.kind, job.state) == (first, "main", "pipeline", "queued")

    second = live.alice.upload_file(
        path_or_fileobj=b"# more\n", path_in_repo="NOTES.md", repo_id="alice/echo_env", repo_type="space"
    ).oid
    assert live.tasks() == ["done"]
    assert live.env("alice/echo_env").sha == second
    events = _events(live, "alice/echo_env")
    assert [e["kind"] for e in events] == ["revision", "indexed"]
    assert events[0]["details"] == {"old_sha": first, "new_sha": second}
    assert events[0]["cause"].startswith("webhook delivery ") and "repo.content update" in events[0]["cause"]


def test_replayed_duplicated_and_late_deliveries_change_nothing(live: Live) -> None:
    live.publish("alice/echo_env", env_files("echo_env"))
    live.tasks()
    before = live.counts()

    replay = live.hub.webhooks.replay(len(live.hub.webhooks.deliveries) - 1)  # the Hub's "Replay" button
    assert replay.status == 200 and replay.reply["status"] == "duplicate"
    again = live.post(replay.payload)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    assert live.tasks() == [] and live.counts() == before

    # Two pushes whose deliveries arrive newest first (the stand-in cannot reach the service meanwhile).
    hook = next(iter(live.hub.webhooks.hooks.values()))
    hook.url, service_url = "http://127.0.0.1:9/unreachable", hook.url
    a = live.alice.upload_file(
        path_or_fileobj=b"a", path_in_repo="a.txt", repo_id="alice/echo_env", repo_type="space"
    ).oid
    b = live.alice.upload_file(
        path_or_fileobj=b"b", path_in_repo="b.txt", repo_id="alice/echo_env", repo_type="space"
    ).oid
    late = live.hub.webhooks.wait()[-2:]
    hook.url = service_url
    assert [d.payload["updatedRefs"][0]["newSha"] for d in late] == [a, b]
    assert live.post(late[1].payload).status_code == 202
    assert live.post(late[0].payload).status_code == 202  # older, arriving later
    assert live.tasks() == ["done"]  # one index job: the second request joined the waiting one
    env = live.env("alice/echo_env")
    with live.factory() as s:
        shas = set(s.scalars(select(EnvVersion.sha).where(EnvVersion.env_id == env.id)))
    assert env.sha == b and a not in shas and b in shas


def test_forged_and_malformed_webhooks_are_refused_without_side_effects(live: Live) -> None:
    live.publish("alice/echo_env", env_files("echo_env"))
    live.tasks()
    real = copy.deepcopy(live.hub.webhooks.deliveries[-1].payload)
    before = live.counts()

    missing = live.post(real, secret=None)
    assert missing.status_code == 401 and "X-Webhook-Secret" in missing.json()["error"]["message"]
    for wrong in ("nope", SECRET.upper(), SECRET + "x", SECRET[:-1]):
        assert live.post(real, secret=wrong).status_code == 403
    not_json = live.post(None, content=b"{not json")
    assert not_json.status_code == 422 and "not JSON" in not_json.json()["error"]["message"]
    assert live.post(None, content=b"[1, 2]").status_code == 422
    no_repo = live.post({k: v for k, v in real.items() if k != "repo"})
    assert no_repo.status_code == 422 and "repo" in no_repo.json()["error"]["message"]
    assert any(e["loc"] == ["repo"] for e in no_repo.json()["error"]["errors"])
    for bad in (
        {"webhook": {"id": "x", "version": 2}},
        {"event": {"action": "explode", "scope": "repo"}},
        {"repo": {**real["repo"], "name": "../../etc"}},
        {"repo": {**real["repo"], "headSha": "not-a-sha"}},
        {"event": {"action": "create", "scope": "discussion"}},
    ):
        reply = live.post({**real, **bad})
        assert reply.status_code == 422, (bad, reply.text)
        assert reply.json()["error"]["code"] == "invalid_payload"
    huge = live.post(None, content=b'{"pad": "' + b"x" * 1_100_000 + b'"}')
    assert huge.status_code == 413
    assert live.counts() == before  # nothing recorded, nothing queued

    # A payload with the right secret but a made-up sha: the index job reads the truth from the Hub.
    forged = {
        **real,
        "repo": {**real["repo"], "headSha": "f" * 40},
        "updatedRefs": [{"ref": "refs/heads/main", "oldSha": real["repo"]["headSha"], "newSha": "f" * 40}],
    }
    assert live.post(forged).status_code == 202
    assert live.tasks() == ["done"]
    after = live.counts()
    assert (after["versions"], after["envs"], after["events"]) == (before["versions"], before["envs"], before["events"])
    assert live.env("alice/echo_env").sha == real["repo"]["headSha"]


def test_webhooks_are_refused_while_no_secret_is_configured(live: Live, hub_settings) -> None:
    from hub_service.app import create_app
    from tests.support.servers import serve_app

    with serve_app(create_app(hub_settings, run_migrations=False)) as url:
        reply = httpx.post(f"{url}/webhooks/hf", json={}, headers={"X-Webhook-Secret": "anything"})
    assert reply.status_code == 403 and "OPENENV_HUB_WEBHOOK_SECRET" in reply.json()["error"]["message"]


def test_events_that_change_nothing_are_recorded_as_ignored(live: Live) -> None:
    live.publish("alice/echo_env", env_files("echo_env"))
    live.tasks()
    before = live.counts()
    live.alice.create_repo("alice/a-model")  # a model, not a Space
    live.alice.create_discussion("alice/echo_env", "How do I use this?", repo_type="space")  # not a pull request
    live.alice.comment_discussion("alice/echo_env", 1, "like this", repo_type="space")  # a comment
    deliveries = live.delivered()
    assert {d.reply["status"] for d in deliveries[-3:]} == {"ignored"}
    reasons = {d.reply["reason"] for d in deliveries[-3:]}
    assert reasons == {
        "a model repo, not a Space",
        "a discussion, not a pull request",
        "comments do not change a pull request",
    }
    tag_only = {
        **deliveries[-1].payload,
        "event": {"action": "update", "scope": "repo.content"},
        "repo": {**deliveries[0].payload["repo"]},
        "updatedRefs": [{"ref": "refs/tags/v1", "oldSha": None, "newSha": "a" * 40}],
    }
    tag_only.pop("discussion"), tag_only.pop("comment")
    assert live.post(tag_only).json()["reason"] == "no change to main or to a pull request"
    after = live.counts()
    assert after["jobs"] == before["jobs"] and after["versions"] == before["versions"]
    assert after["deliveries"] == before["deliveries"] + 4


def test_a_deleted_space_is_gone_and_a_moved_one_keeps_its_history(live: Live) -> None:
    sha = live.publish("alice/echo_env", env_files("echo_env"))
    live.publish("alice/grid", env_files("echo_env"))
    live.tasks()

    live.alice.move_repo("alice/echo_env", "alice/echo_env_v2", repo_type="space")
    assert live.tasks() == ["done"]
    assert live.env("alice/echo_env") is None
    moved = live.env("alice/echo_env_v2")
    assert moved is not None and moved.sha == sha and not moved.gone
    events = _events(live, "alice/echo_env_v2")
    assert events[0]["kind"] == "moved" and events[0]["details"] == {
        "moved_from": "alice/echo_env",
        "moved_to": "alice/echo_env_v2",
    }
    assert [e["kind"] for e in events][-1] == "indexed"  # the same env, its trail intact

    live.alice.delete_repo("alice/grid", repo_type="space")
    assert live.tasks() == ["done"]
    assert live.env("alice/grid").gone
    gone = httpx.get(f"{live.url}/api/v1/envs/alice/grid/resolve")
    assert gone.status_code == 404 and gone.json()["error"]["gone"] is True
    assert _events(live, "alice/grid")[0]["kind"] == "gone"
    with live.factory() as s:
        delivery = s.scalar(select(WebhookDelivery).where(WebhookDelivery.action == "delete"))
        assert delivery.outcome == "queued" and delivery.repo == "alice/grid"
        assert (
            s.scalar(select(EnvEvent.cause).where(EnvEvent.kind == "gone"))
            == f"webhook delivery {delivery.id} (repo delete)"
        )
        assert s.scalar(select(EnvRecord).where(EnvRecord.name == "echo_env_v2")).gone is False


def _hub_payload(scope: str, action: str, repo_type: str, name: str, **extra: object) -> dict:
    """A version-3 payload in the shape the Hub's webhook docs show (ids made up)."""
    web = f"https://huggingface.co/{'' if repo_type == 'model' else repo_type + 's/'}{name}"
    return {
        "event": {"action": action, "scope": scope},
        "repo": {
            "type": repo_type,
            "name": name,
            "id": "6400c0ffee0123456789abcd",
            "private": False,
            "url": {"web": web, "api": web.replace("huggingface.co/", "huggingface.co/api/")},
            "owner": {"id": "6400c0ffee0123456789abce"},
        },
        "webhook": {"id": "6400c0ffee0123456789abcf", "version": 3},
        **extra,
    }


def test_payloads_as_wide_as_the_hub_sends_are_ignored_with_a_reason_not_refused(live: Live) -> None:
    sha = live.publish("alice/echo_env", env_files("echo_env"))
    live.tasks()
    before = live.counts()
    ownerless = _hub_payload("repo.content", "update", "model", "gpt2", updatedRefs=[])
    kernel = _hub_payload("repo", "create", "kernel", "alice/fast-attn")
    new_scope = _hub_payload("repo.lfs", "update", "space", "alice/echo_env")
    bare_space = _hub_payload("repo", "update", "space", "echo_env")
    replies = [live.post(p) for p in (ownerless, kernel, new_scope, bare_space)]
    assert [(r.status_code, r.json()["status"]) for r in replies] == [(200, "ignored")] * 4
    assert [r.json()["reason"] for r in replies] == [
        "a model repo, not a Space",
        "a kernel repo, not a Space",
        "scope 'repo.lfs' is not one this service acts on",
        "'echo_env' names no owner; the catalog indexes Spaces, which always have one",
    ]
    assert live.counts()["jobs"] == before["jobs"]

    # A push of 1,500 tags and main: no fixed cap (the body size is the bound), main is indexed.
    refs = [{"ref": f"refs/tags/v{i}", "oldSha": None, "newSha": sha} for i in range(1500)]
    refs.append({"ref": "refs/heads/main", "oldSha": sha, "newSha": sha})
    many = _hub_payload("repo.content", "update", "space", "alice/echo_env", updatedRefs=refs)
    many["repo"]["headSha"] = sha
    reply = live.post(many)
    assert reply.status_code == 202 and reply.json()["status"] == "queued"
    assert live.tasks() == ["done"] and live.env("alice/echo_env").sha == sha

    # The secret in the handler's URL, as the Hub's docs suggest for handlers that cannot read headers.
    url = f"{live.url}/webhooks/hf"
    by_query = httpx.post(url, params={"secret": SECRET}, json=_hub_payload("repo", "update", "model", "bert"))
    assert by_query.status_code == 200 and by_query.json()["status"] == "ignored"
    wrong = httpx.post(url, params={"secret": SECRET + "x"}, json=_hub_payload("repo", "update", "model", "bert"))
    assert wrong.status_code == 403 and wrong.json()["error"]["code"] == "forbidden"
