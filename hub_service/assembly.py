"""Where the Hub is put together: the lifecycle's listeners and the task handlers.

Every entry point calls `assemble(settings)` before it works on the database: the API app
(`create_app`), every worker (`Worker`, so `openenv hub worker`, `serve` and the index with
`--wait`), and `serve.index_all`. It sits at the top of the Hub, beside those entry points: it
wires the pipeline, the pull-request bot, webhooks and image collection, and nothing it wires
imports it. Registering is idempotent: assembling twice replaces, never doubles, a listener.
A new listener is one line here and its own module. A new task kind is that plus a member of
`JobKind`, from which the database's constraint is made at the next migration
(`hub_service.vocabularies`); nothing else learns of it.
"""

from __future__ import annotations

from functools import partial

from sqlalchemy.orm import Session

from hub_service import lifecycle
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import BuilderKind, VersionState
from hub_service.db import sessionmaker_for
from hub_service.lifecycle import FINISHED, Transition
from hub_service.pipeline.images_gc import prune_env_images
from hub_service.prbot.service import report_pr, sync_pr, version_finished
from hub_service.queue.kinds import JobKind
from hub_service.queue.tasks import Handler
from hub_service.settings import HubSettings
from hub_service.webhooks.tasks import index_repo

__all__ = ["assemble"]


def assemble(settings: HubSettings) -> dict[str, Handler]:
    """Register the lifecycle's listeners; returns the task handlers by job kind."""
    # Waiting for the infrastructure is reported too (the comment says so), and edited with the verdict.
    lifecycle.listen("pull_request_bot", on=FINISHED | {VersionState.WAITING}, in_transaction=_report_pull_requests)
    lifecycle.listen(
        "image_collection",
        on={VersionState.PASSED, VersionState.FAILED},
        after_commit=partial(_collect_images, settings),
    )
    return {JobKind.INDEX_REPO: index_repo, JobKind.PR_SYNC: sync_pr, JobKind.PR_REPORT: report_pr}


def _report_pull_requests(session: Session, env: EnvRecord, version: EnvVersion, moved: Transition) -> None:
    version_finished(session, env, version)  # a report for each open pull request at that sha


def _collect_images(settings: HubSettings, session: Session, moved: Transition) -> None:
    """The env's images nobody needs any more go, once its revision has a verdict."""
    if moved.builder == BuilderKind.CONTAINER:
        prune_env_images(settings, sessionmaker_for(session.get_bind()), moved.env_id)  # type: ignore[arg-type]
