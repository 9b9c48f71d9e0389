"""A play step is one POST to Gradio's direct route (benchmarks/play_latency.py measures why), and
that route stays as closed as the rest: only the functions set to skip the queue (the play panel's
steps) run there, inputs of the wrong shape are answered 422 (never a server error), and every
other direct route is refused."""

from __future__ import annotations

import httpx
import pytest

from hub_service.app import create_app
from hub_service.settings import HubSettings
from tests.support.servers import serve_app

pytestmark = pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)


def test_a_step_is_one_post_and_the_direct_route_runs_nothing_else(hub_settings: HubSettings) -> None:
    settings = hub_settings.model_copy(update={"website": True, "rate_web_burst": 1000})
    with serve_app(create_app(settings)) as url:
        config = httpx.get(f"{url}/config").json()
        direct = [d for d in config["dependencies"] if d.get("queue") is False and d.get("backend_fn")]
        queued = [d for d in config["dependencies"] if d.get("queue") is not False and d.get("backend_fn")]
        assert direct and queued
        by_id = {c["id"]: c for c in config["components"]}
        # The hidden button an action button presses: a step of a visitor with no session yet.
        step = next(
            d
            for d in direct
            if any(by_id.get(t[0], {}).get("props", {}).get("elem_id") == "oe-play-go" for t in d["targets"])
        )
        body = {"data": [None] * len(step["inputs"]), "fn_index": step["id"], "session_hash": "visitor1"}
        body["data"][0] = "1:0"
        answer = httpx.post(f"{url}/gradio_api/run/predict", json=body)
        assert answer.status_code == 200, answer.text  # one round trip, answered with the panel's outputs
        assert "data" in answer.json()

        wrong = {"data": [{"not": "an input"}], "fn_index": step["id"], "session_hash": "visitor1"}
        refused = httpx.post(f"{url}/gradio_api/run/predict", json=wrong)
        assert refused.status_code == 422 and "do not fit" in refused.json()["error"]["message"]

        other = {"data": [], "fn_index": queued[0]["id"], "session_hash": "visitor1"}
        queued_answer = httpx.post(f"{url}/gradio_api/run/predict", json=other)
        assert queued_answer.status_code == 404 and "through the queue" in queued_answer.text
        assert httpx.post(f"{url}/gradio_api/run/search", json=body).status_code == 404
        assert httpx.post(f"{url}/gradio_api/api/predict", json=body).status_code == 404
