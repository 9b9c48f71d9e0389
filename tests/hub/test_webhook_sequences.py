"""Webhooks as the Hugging Face Hub really sends them, replayed as sequences (issue 30): the Hub's
payloads carry no delivery id, so the same change made twice is byte-identical. Close, reopen and
close a pull request; push main A→B→A→B; delete a pull request after it opened; storm it with
comments; delete a Space or make it private: every genuine event takes effect, a replay changes
nothing, and no check stays open on a closed or deleted pull request. (Two processes racing on one
delivery: test_webhook_race.py.)"""

from __future__ import annotations

import httpx
from sqlalchemy import select

from hub_service.prbot.models import PullRequestCheck
from hub_service.queue.models import Job
from tests.hub.live import Live, env_files

REPO = "alice/echo_env"


def _check(live: Live, num: int) -> PullRequestCheck:
    with live.factory() as s:
        return s.scalar(select(PullRequestCheck).where(PullRequestCheck.num == num))


def _pipeline_jobs(live: Live, version_id: int | None) -> list[str]:
    with live.factory() as s:
        return list(s.scalars(select(Job.state).where(Job.version_id == version_id, Job.kind == "pipeline")))


def _pulls(live: Live) -> dict[int, dict]:
    items = httpx.get(f"{live.url}/api/v1/envs/{REPO}/pulls").json()["items"]
    return {p["num"]: p for p in items}


def _set_status(live: Live, num: int, status: str) -> dict:
    """alice closes or reopens pull request `num`; returns the delivery's payload (after the tasks ran)."""
    live.alice.change_discussion_status(REPO, num, status, repo_type="space")
    delivery = live.delivered()[-1]
    assert delivery.payload["event"] == {"action": "update", "scope": "discussion"}
    assert delivery.reply["status"] == "queued", delivery.reply  # never "duplicate": it is a new event
    live.tasks()
    return delivery.payload


def test_close_reopen_close_ends_closed_with_no_job_left_on_the_closed_pull_request(live: Live) -> None:
    live.publish(REPO, env_files("echo_env"))
    live.tasks()
    num, head = live.open_pr(REPO, env_files("echo_env", **{"NOTES.md": "better"}))
    live.tasks()
    opened = _check(live, num)
    assert (
        opened.status == "draft" and opened.head_sha == head and _pipeline_jobs(live, opened.version_id) == ["queued"]
    )

    first_close = _set_status(live, num, "closed")
    assert _check(live, num).status == "closed" and _pipeline_jobs(live, opened.version_id) == ["cancelled"]
    _set_status(live, num, "open")
    assert _check(live, num).status == "open"
    assert sorted(_pipeline_jobs(live, opened.version_id)) == ["cancelled", "queued"]  # checked again
    second_close = _set_status(live, num, "closed")

    assert second_close == first_close  # byte-identical: only the state tells the two closes apart
    check = _check(live, num)
    assert check.status == "closed" and _pipeline_jobs(live, check.version_id) == ["cancelled", "cancelled"]
    assert _pulls(live)[num]["status"] == "closed" and _pulls(live)[num]["state"] == "cancelled"
    comments = live.bot_comments(REPO, num)
    assert len(comments) == 1 and "stopped" in comments[0].content.lower()


def test_a_merged_pull_request_ends_merged_and_main_follows_the_merge(live: Live) -> None:
    live.publish(REPO, env_files("echo_env"))
    live.tasks()
    num, _ = live.open_pr(REPO, env_files("echo_env", **{"NOTES.md": "merge me"}))
    live.alice.rename_discussion(REPO, num, "Merge me, please", repo_type="space")  # an update too
    live.tasks()
    version = _check(live, num).version_id
    assert _check(live, num).title == "Merge me, please" and _pipeline_jobs(live, version) == ["queued"]
    live.alice.merge_pull_request(REPO, num, repo_type="space")
    merged, pushed = live.delivered()[-2:]
    assert merged.payload["discussion"]["status"] == "merged" and merged.reply["status"] == "queued"
    assert pushed.payload["updatedRefs"][0]["ref"] == "refs/heads/main" and pushed.reply["status"] == "queued"
    live.tasks()
    assert _check(live, num).status == "merged" and _pipeline_jobs(live, version) == ["cancelled"]
    assert live.env(REPO).sha == merged.payload["discussion"]["changes"]["mergeCommitId"]


def test_main_pushed_a_b_a_b_ends_at_b_and_a_late_replay_changes_nothing(live: Live) -> None:
    a = live.publish(REPO, env_files("echo_env"))
    live.tasks()
    b = live.alice.upload_file(path_or_fileobj=b"b", path_in_repo="b.txt", repo_id=REPO, repo_type="space").oid
    live.tasks()
    live.hub.force_push(REPO, a)
    live.tasks()
    assert live.env(REPO).sha == a
    live.hub.force_push(REPO, b)
    deliveries = live.delivered()
    a_to_b, b_to_a, again = (d for d in deliveries[-3:])
    assert again.payload == a_to_b.payload and again.payload != b_to_a.payload
    assert again.reply["status"] == "queued", again.reply
    assert live.tasks() == ["done"]
    assert live.env(REPO).sha == b  # the catalog follows the Space, not a hash of what it saw before
    events = httpx.get(f"{live.url}/api/v1/envs/{REPO}/events").json()["items"]
    moves = [(e["details"]["old_sha"], e["details"]["new_sha"]) for e in events if e["kind"] == "revision"]
    assert moves == [(a, b), (b, a), (a, b)]  # newest first and last alike: three genuine moves

    # The Hub's Replay button on the newest delivery, seconds later: a duplicate, nothing queued.
    replay = live.hub.webhooks.replay(len(live.hub.webhooks.deliveries) - 1)
    assert replay.status == 200 and replay.reply["status"] == "duplicate"
    # A replay of an older state (B→A) is applied, and changes nothing: the Space is at B.
    before = live.counts()
    late = live.post(b_to_a.payload)
    assert late.status_code == 202 and late.json()["status"] == "queued"
    assert live.tasks() == ["done"]
    after = live.counts()
    assert live.env(REPO).sha == b
    assert (after["versions"], after["events"]) == (before["versions"], before["events"])


def test_a_deleted_pull_request_closes_its_check_by_webhook_or_by_reconcile(live: Live) -> None:
    live.publish(REPO, env_files("echo_env"))
    live.tasks()
    num, _ = live.open_pr(REPO, env_files("echo_env", **{"NOTES.md": "one"}))
    other, _ = live.open_pr(REPO, env_files("echo_env", **{"NOTES.md": "two"}), title="Another")
    live.tasks()
    versions = {n: _check(live, n).version_id for n in (num, other)}
    assert all(_pipeline_jobs(live, v) == ["queued"] for v in versions.values())

    auth = {"Authorization": f"Bearer {live.hub.token}"}
    deleted = httpx.delete(f"{live.hub.url}/api/spaces/{REPO}/discussions/{num}", headers=auth)
    assert deleted.status_code == 200
    delivery = live.delivered()[-1]
    assert delivery.payload["event"] == {"action": "delete", "scope": "discussion"}
    assert delivery.reply["status"] == "queued"
    live.tasks()
    assert _check(live, num).status == "deleted" and _pipeline_jobs(live, versions[num]) == ["cancelled"]
    refs = live.alice.list_repo_refs(REPO, repo_type="space", include_pull_requests=True)
    assert f"refs/pr/{num}" not in {r.ref for r in refs.pull_requests or []}

    # The second one is deleted while the service cannot be reached: the reconcile closes it.
    hook = next(iter(live.hub.webhooks.hooks.values()))
    hook.url, service_url = "http://127.0.0.1:9/unreachable", hook.url
    httpx.delete(f"{live.hub.url}/api/spaces/{REPO}/discussions/{other}", headers=auth).raise_for_status()
    live.hub.webhooks.wait()
    hook.url = service_url
    assert _check(live, other).status == "draft"
    from hub_service.db import session_scope
    from hub_service.prbot.service import reconcile_open

    with session_scope(live.factory) as s:
        assert reconcile_open(s) == 1
    live.tasks()
    assert _check(live, other).status == "deleted" and _pipeline_jobs(live, versions[other]) == ["cancelled"]
    assert {p["status"] for p in _pulls(live).values()} == {"deleted"}


def test_a_comment_storm_changes_no_check_and_leaves_one_bot_comment(live: Live) -> None:
    live.publish(REPO, env_files("echo_env"))
    live.tasks()
    num, head = live.open_pr(REPO, env_files("echo_env", **{"NOTES.md": "x"}))
    live.tasks()
    before = live.counts()
    for i in range(20):
        comment = live.bob.comment_discussion(REPO, num, f"ping {i}", repo_type="space")
        if i % 5 == 0:
            live.bob.edit_discussion_comment(REPO, num, comment.id, f"ping {i} (edited)", repo_type="space")
    storm = live.delivered()[-24:]
    assert {d.payload["event"]["scope"] for d in storm} == {"discussion.comment"}
    assert {(d.status, d.reply["status"]) for d in storm} == {(200, "ignored")}
    assert live.tasks() == []
    after = live.counts()
    assert after["jobs"] == before["jobs"] and after["versions"] == before["versions"]
    check = _check(live, num)
    assert check.status == "draft" and check.head_sha == head and _pipeline_jobs(live, check.version_id) == ["queued"]
    assert len(live.bot_comments(REPO, num)) == 1


def test_a_space_made_private_or_deleted_leaves_the_catalog_and_closes_its_checks(live: Live) -> None:
    live.publish(REPO, env_files("echo_env"))
    live.publish("alice/grid", env_files("echo_env"))
    live.tasks()
    num, _ = live.open_pr(REPO, env_files("echo_env", **{"NOTES.md": "x"}))
    live.tasks()
    version = _check(live, num).version_id

    live.alice.update_repo_settings("alice/grid", private=True, repo_type="space")
    assert live.delivered()[-1].payload["event"] == {"action": "update", "scope": "repo.config"}
    live.alice.delete_repo(REPO, repo_type="space")
    live.tasks()
    listed = {e["id"] for e in httpx.get(f"{live.url}/api/v1/envs").json()["items"]}
    assert REPO not in listed and "alice/grid" not in listed
    assert live.env(REPO).gone and live.env("alice/grid").gone
    assert _check(live, num).status == "deleted" and _pipeline_jobs(live, version) == ["cancelled"]

    live.alice.update_repo_settings("alice/grid", private=False, repo_type="space")  # public again: back
    live.tasks()
    assert not live.env("alice/grid").gone


def test_the_reconcile_reports_how_many_envs_it_had_to_correct(live: Live, caplog) -> None:
    from hub_service.serve import reconcile

    settings = live.settings.model_copy(update={"hf_enabled": True, "local_source": None})
    live.publish(REPO, env_files("echo_env"))
    live.publish("alice/grid", env_files("echo_env"))
    live.tasks()
    reconcile(settings)  # the first pass: a baseline, whatever it finds
    assert httpx.get(f"{live.url}/api/v1/health").json()["drift"]["hf"]["last_corrected"] == 0

    # Webhooks lost: a push to one Space and the deletion of the other never reach the service.
    hook = next(iter(live.hub.webhooks.hooks.values()))
    hook.url = "http://127.0.0.1:9/unreachable"
    pushed = live.alice.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id=REPO, repo_type="space").oid
    live.alice.delete_repo("alice/grid", repo_type="space")
    live.hub.webhooks.wait()
    with caplog.at_level("WARNING", logger="hub_service.indexer"):
        reconcile(settings)
    assert live.env(REPO).sha == pushed and live.env("alice/grid").gone
    drift = httpx.get(f"{live.url}/api/v1/health").json()["drift"]["hf"]
    assert drift["last_corrected"] == 2 and drift["corrected_total"] == 2 and drift["passes"] == 2
    assert sorted(drift["last_details"]) == ["alice/echo_env: revision", "alice/grid: gone"]
    assert any("corrected 2 env(s)" in r.getMessage() for r in caplog.records)

    reconcile(settings)  # nothing missed since: no drift
    drift = httpx.get(f"{live.url}/api/v1/health").json()["drift"]["hf"]
    assert (drift["last_corrected"], drift["corrected_total"], drift["passes"]) == (0, 2, 3)
