"""The stand-in Hub's webhooks are faithful: registered with the real client, delivered with the
secret, every payload parses with huggingface_hub's own `WebhookPayload` model, and only watched
repos and domains are sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from huggingface_hub import CommitOperationAdd, HfApi, WebhookPayload
from huggingface_hub.errors import HfHubHTTPError

from tests.support.servers import serve_app


def _receiver(seen: list[tuple[dict[str, Any], str | None]]) -> FastAPI:
    app = FastAPI()

    @app.post("/hook")
    async def hook(request: Request) -> dict[str, str]:
        seen.append((await request.json(), request.headers.get("x-webhook-secret")))
        return {"ok": "yes"}

    return app


def test_payloads_parse_with_the_clients_model_and_follow_what_is_watched(hf_hub) -> None:
    seen: list[tuple[dict[str, Any], str | None]] = []
    bob = HfApi(endpoint=hf_hub.url, token=hf_hub.add_user("bob"))
    api = HfApi(endpoint=hf_hub.url, token=hf_hub.token)
    with serve_app(_receiver(seen)) as url:
        info = api.create_webhook(
            url=f"{url}/hook", watched=[{"type": "user", "name": "alice"}], domains=["repo", "discussion"], secret="s"
        )
        assert [h.id for h in api.list_webhooks()] == [info.id] and info.secret == "s"
        api.create_repo("alice/space", repo_type="space", space_sdk="docker")
        main = api.create_commit(
            "alice/space", [CommitOperationAdd("app.py", b"x")], commit_message="app", repo_type="space"
        ).oid
        pr = bob.create_commit(
            "alice/space",
            [CommitOperationAdd("app.py", b"y")],
            commit_message="better",
            repo_type="space",
            create_pr=True,
        )
        bob.create_commit(
            "alice/space",
            [CommitOperationAdd("b.py", b"z")],
            commit_message="more",
            repo_type="space",
            revision="refs/pr/1",
        )
        comment = api.comment_discussion("alice/space", 1, "thanks", repo_type="space")
        api.edit_discussion_comment("alice/space", 1, comment.id, "thanks!", repo_type="space")
        api.merge_pull_request("alice/space", 1, repo_type="space")
        api.move_repo("alice/space", "alice/space2", repo_type="space")
        bob.create_repo("bob/elsewhere", repo_type="space", space_sdk="docker")  # not watched
        api.delete_repo("alice/space2", repo_type="space")
        hf_hub.webhooks.wait()
        before = len(hf_hub.webhooks.deliveries)
        replay = hf_hub.webhooks.replay(1)  # the Hub's "Replay" button
    payloads = [WebhookPayload.model_validate(p) for p, _ in seen[:before]]
    assert {secret for _, secret in seen} == {"s"}
    assert [(p.event.scope, p.event.action) for p in payloads] == [
        ("repo", "create"),
        ("repo.content", "update"),
        ("discussion", "create"),
        ("repo.content", "update"),
        ("repo.content", "update"),
        ("discussion.comment", "create"),
        ("discussion.comment", "update"),
        ("discussion", "update"),
        ("repo.content", "update"),
        ("repo", "move"),
        ("repo", "delete"),
    ]
    assert payloads[1].updatedRefs[0].ref == "refs/heads/main" and payloads[1].updatedRefs[0].newSha == main
    assert seen[1][0]["repo"]["headSha"] == main
    created = payloads[2]
    assert (
        created.discussion.isPullRequest
        and created.discussion.num == pr.pr_num
        and created.discussion.status == "draft"
    )
    assert payloads[3].updatedRefs[0].ref == "refs/pr/1" and payloads[3].updatedRefs[0].oldSha is None
    assert payloads[4].updatedRefs[0].oldSha == pr.oid
    assert payloads[6].comment.content == "thanks!"
    assert payloads[7].discussion.status == "merged" and payloads[7].discussion.changes.mergeCommitId
    assert payloads[9].repo.name == "alice/space" and payloads[9].movedTo.name == "alice/space2"
    assert all(p.repo.name.startswith("alice/") for p in payloads)
    assert replay.status == 200 and seen[-1][0] == seen[1][0] and len(hf_hub.webhooks.deliveries) == before + 1


def test_a_deleted_pull_request_and_a_force_push_are_sent_as_the_hub_sends_them(hf_hub) -> None:
    seen: list[tuple[dict[str, Any], str | None]] = []
    api = HfApi(endpoint=hf_hub.url, token=hf_hub.token)
    bob = HfApi(endpoint=hf_hub.url, token=hf_hub.add_user("bob"))
    with serve_app(_receiver(seen)) as url:
        api.create_webhook(url=f"{url}/hook", watched=[{"type": "user", "name": "alice"}], secret="s")
        api.create_repo("alice/space", repo_type="space", space_sdk="docker")
        a = api.create_commit("alice/space", [CommitOperationAdd("a", b"a")], commit_message="a", repo_type="space").oid
        b = api.create_commit("alice/space", [CommitOperationAdd("b", b"b")], commit_message="b", repo_type="space").oid
        pr = bob.create_commit(
            "alice/space", [CommitOperationAdd("c", b"c")], commit_message="c", repo_type="space", create_pr=True
        )
        hf_hub.force_push("alice/space", a)
        hf_hub.force_push("alice/space", b)
        auth = {"Authorization": f"Bearer {hf_hub.token}"}
        by_bob = httpx.delete(
            f"{hf_hub.url}/api/spaces/alice/space/discussions/{pr.pr_num}",
            headers={"Authorization": f"Bearer {bob.token}"},
        )
        assert by_bob.status_code == 403  # only the repo's owners delete discussions
        assert httpx.delete(f"{hf_hub.url}/api/spaces/alice/space/discussions/{pr.pr_num}", headers=auth).is_success
        hf_hub.webhooks.wait()
    payloads = [WebhookPayload.model_validate(p) for p, _ in seen]
    pushes = [
        seen[i][0]
        for i, p in enumerate(payloads)
        if p.event.scope == "repo.content" and p.updatedRefs[0].ref == "refs/heads/main"
    ]
    moves = [(p["updatedRefs"][0]["oldSha"], p["updatedRefs"][0]["newSha"]) for p in pushes]
    assert moves[-3:] == [(a, b), (b, a), (a, b)]
    assert pushes[-3] == pushes[-1]  # byte-identical, as the Hub's are: its payloads carry no delivery id
    deleted = payloads[-1]
    assert (deleted.event.scope, deleted.event.action) == ("discussion", "delete")
    assert deleted.discussion.num == pr.pr_num and deleted.discussion.isPullRequest
    refs = api.list_repo_refs("alice/space", repo_type="space", include_pull_requests=True)
    assert refs.pull_requests == [] and [r.target_commit for r in refs.branches] == [b]
    with pytest.raises(HfHubHTTPError) as gone:
        api.get_discussion_details("alice/space", pr.pr_num, repo_type="space")
    assert gone.value.response.status_code == 404
