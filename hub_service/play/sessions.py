"""`PlayManager`: private env sessions for website visitors, held in this process's memory.

A session belongs to one browser tab (`tab`: Gradio's session hash) and one purpose (`kind`:
"play" for a human, "try" for a model); a visitor (by address) may hold a few at once, and all
visitors together a bounded number. The caps count the sessions of every Hub process on the same
database: each session holds a lease there (hub_service/quota/leases.py) that this process's
heartbeat renews, so the sessions of a process that died stop counting when their leases expire.
Sessions end when the tab goes away, when unused for
`play_idle_timeout_s`, or at shutdown; their env instance stops when nobody plays it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from hub_service.catalog import service as catalog
from hub_service.catalog.models import EnvRecord, EnvVersion
from hub_service.catalog.states import BuilderKind, VersionState
from hub_service.health.service import record_stage
from hub_service.play.errors import AllInUse, NotPlayable, PlayError, PlayLimit, PlayStartError
from hub_service.play.instances import Instance, InstancePool, Target
from hub_service.play.waking import woken
from hub_service.quota.leases import LeaseBook
from hub_service.settings import HubSettings

__all__ = ["PlayManager", "PlaySession", "resolve_target"]

log = logging.getLogger("hub_service.play")


@dataclass
class PlaySession:
    """One visitor's session on one env: its own WebSocket to the env server."""

    id: str
    tab: str
    kind: str
    visitor: str
    env_id: str
    instance: Instance
    client: Any
    action_schema: dict[str, Any]
    description: str = ""
    history: list[dict[str, Any]] = field(default_factory=list)
    last: dict[str, Any] | None = None
    episode_return: float = 0.0
    created: float = field(default_factory=time.monotonic)
    last_active: float = field(default_factory=time.monotonic)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    max_reply_mb: float = 0.0  # the client's cap on one reply (play_max_reply_mb), named when it trips
    # How long a reset waits while the env's server still answers CAPACITY_REACHED (play_release_grace_s): a
    # server frees a closed session's place a moment after (openenv/validation/episode.py, reset_when_free).
    release_grace_s: float = 3.0
    lease: str = ""  # its lease in the database, which counts it against the caps of every process
    reset_options: dict[str, Any] | None = None  # the JSON Schema of reset's arguments, when the server tells
    idle_timeout_s: float = 0.0  # it ends when unused this long (play_idle_timeout_s): the panel says when
    shown_picture: str = ""  # the picture the visitor saw last, to tell them when a move changed nothing

    def check_options(self, options: dict[str, Any] | None) -> None:
        """Refuse options reset does not take, naming those it does (a typo would be silently ignored).

        Raises:
            PlayError: an unknown option, or options given to an env whose reset takes none.
        """
        if not options or self.reset_options is None:
            return
        known = self.reset_options.get("properties")
        known = known if isinstance(known, dict) else {}
        if not known and self.reset_options.get("additionalProperties"):
            return  # reset takes any keyword: nothing to check against
        unknown = sorted(k for k in options if k not in known)
        if not unknown:
            return
        if not known:
            raise PlayError(f"{self.env_id} takes no episode options; leave the box empty")
        listed = ", ".join(
            f"{name} (default {json.dumps(spec['default'])})" if isinstance(spec, dict) and "default" in spec else name
            for name, spec in known.items()
        )
        raise PlayError(f"{self.env_id} has no episode option {', '.join(map(repr, unknown))}; it takes: {listed}")

    def touch(self) -> None:
        self.last_active = time.monotonic()

    async def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start an episode (`options`: the env's own reset arguments); returns {"observation", "reward", "done"}."""
        from openenv.validation.episode import reset_when_free

        async with self.lock:
            self.touch()
            with self._naming_the_cap():
                result, _ = await reset_when_free(
                    self.client, self.release_grace_s, **(options or {}), **({"seed": seed} if seed is not None else {})
                )
            self.history, self.episode_return = [], 0.0
            self.last = _payload(result)
            return self.last

    async def step(self, action: dict[str, Any]) -> dict[str, Any]:
        """Apply `action`; returns {"observation", "reward", "done"} and records it in `history`.

        Raises:
            openenv.errors.InvalidActionError: the env rejected the action (nothing recorded).
            openenv.errors.EnvServerError / EnvClientError: the env failed or is gone.
        """
        async with self.lock:
            self.touch()
            with self._naming_the_cap():
                result = await self.client.step(action)
            self.last = _payload(result)
            self.episode_return += float(result.reward or 0.0)
            self.history.append({"action": action, "reward": result.reward, "done": result.done})
            return self.last

    @property
    def done(self) -> bool:
        """Whether the current episode is over (stepping again needs a reset first)."""
        return bool(self.last and self.last.get("done"))

    async def render(self) -> Any:
        """A picture of the env now (`openenv.render.Frame`, unsanitized), or None when it draws none.

        Raises:
            openenv.errors.OpenEnvError: the env's render failed, or the session is gone.
        """
        async with self.lock:
            self.touch()
            with self._naming_the_cap():
                return await self.client.render()

    async def state(self) -> dict[str, Any]:
        async with self.lock:
            self.touch()
            with self._naming_the_cap():
                return await self.client.state()

    @contextlib.contextmanager
    def _naming_the_cap(self) -> Iterator[None]:
        from openenv.errors import EnvDisconnectedError

        try:
            yield
        except EnvDisconnectedError as exc:
            if exc.close_code != 1009:  # MESSAGE_TOO_BIG: the client cut off a reply over its cap
                raise
            raise EnvDisconnectedError(
                f"the env sent a reply larger than this Hub's limit of {self.max_reply_mb:g} MB "
                "(play_max_reply_mb), so its session was closed; press Reset to start a new one",
                url=exc.url,
                close_code=exc.close_code,
            ) from None


async def _read_capped(reply: Any, limit: int) -> bytes | None:
    """The body of a streamed httpx reply, or None as soon as it passes `limit` bytes."""
    chunks, size = [], 0
    async for chunk in reply.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _payload(result: Any) -> dict[str, Any]:
    return {"observation": result.observation, "reward": result.reward, "done": result.done}


def resolve_target(db: Session, settings: HubSettings, owner: str, name: str) -> Target:
    """How `owner/name` can be played now: its live Space, its sleeping Space to wake first (with
    this Hub's instance of it to play instead when it does not wake), or an instance to start.

    Raises:
        NotFound: no such env.  NotPlayable: nothing of it has passed the Hub's checks.
    """
    record = catalog.resolve(db, settings, owner, name, None)
    env = catalog.get_env(db, owner, name)
    version = catalog.get_version(db, env, record.revision)
    key = f"{record.repo_id}@{record.revision}"
    # Checked before the live Space too: a running Space whose revision failed is not offered.
    if version.state != VersionState.PASSED:
        why = (
            f"failed at {version.failure_stage}: {version.failure_reason}"
            if version.state == VersionState.FAILED
            else f"is {version.state}"
        )
        raise NotPlayable(
            f"{record.repo_id} cannot be played: its latest revision {why}. Come back when it passes the Hub's checks."
        )
    if record.url:
        return Target(key=key, how="space", url=record.url)
    local = _local_target(settings, env, version, key)
    from openenv.client._space import ASLEEP, STARTING

    stage = (env.stage or "").upper()
    if env.source == "hf" and env.host and version.sha == env.sha and stage in ASLEEP | STARTING:
        # A Space that sleeps (or starts): woken when a visitor starts (play/waking.py), its image else.
        return Target(key=key, how="space", url=env.host, waking_from=stage, fallback=local)
    if local is not None:
        return local
    raise NotPlayable(
        f"{record.repo_id} passed its checks but has no image this Hub can run and no live Space; try `openenv fork {record.repo_id}`"
    )


def _local_target(settings: HubSettings, env: EnvRecord, version: EnvVersion, key: str) -> Target | None:
    """The env's instance this Hub can start itself (its image, or a trusted local folder), if any."""
    from openenv.client.providers import ProcessProvider

    timeout = settings.play_start_timeout_s
    if version.builder == BuilderKind.CONTAINER and version.image_ref:
        from hub_service.sandbox import confined_provider, grant, verify_runtime
        from openenv.declared import read_declared

        image, port = version.image_ref, version.port or 8000
        overrides, _ = grant(settings, read_declared(version.manifest))
        # Played envs are confined exactly like smoke tests (user, capabilities, limits, network).
        return Target(
            key=key,
            how="docker",
            make_provider=lambda: confined_provider(
                settings,
                image,
                startup_timeout_s=timeout,
                labels={"org.openenv.hub.play": "1"},
                port=port,
                overrides=overrides,
            ),
            check_started=lambda provider: verify_runtime(settings, provider, log.info),
        )
    if env.trusted and env.location:
        folder = env.location
        return Target(key=key, how="process", make_provider=lambda: ProcessProvider(folder, startup_timeout_s=timeout))
    return None


class PlayManager:
    """Opens, finds and closes play sessions; enforces the caps; reaps idle ones."""

    def __init__(self, settings: HubSettings, factory: sessionmaker[Session], limiter: Any = None) -> None:
        self.settings = settings
        self.factory = factory
        self.limiter = limiter  # a RateLimiter or SharedRateLimiter with "play" and "model" categories
        self.leases = LeaseBook(factory.kw["bind"], lease_s=settings.play_lease_s)
        self.pool = InstancePool(max_instances=settings.play_max_instances, linger_s=settings.play_instance_linger_s)
        self.sessions: dict[tuple[str, str], PlaySession] = {}
        self._opening: dict[tuple[str, str], str] = {}  # sessions being started: key → visitor
        # Visitors told that every instance is in use, by when they were first told: their place in line.
        self._line: dict[str, float] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._heartbeat: asyncio.Task[None] | None = None
        # A page (Gradio's session hash) plays under its browser tab's token, which outlives a reload:
        # page → token, and the tokens whose last page went, closed after play_resume_grace_s.
        self._pages: dict[str, str] = {}
        self._leaving: dict[str, asyncio.Task[None]] = {}

    # -- sessions ----------------------------------------------------------------------------

    def get(self, tab: str, kind: str = "play") -> PlaySession | None:
        session = self.sessions.get((tab, kind))
        if session is not None:
            session.touch()
        return session

    async def open(
        self,
        tab: str,
        visitor: str,
        owner: str,
        name: str,
        kind: str = "play",
        on_wait: Callable[[str], None] | None = None,
    ) -> PlaySession:
        """This tab's session of `kind` on `owner/name`, opened (and its env started) when needed.
        `on_wait` hears what is waited for, for the visitor: a sleeping Space woken, each of its stages.

        Raises:
            PlayLimit: the visitor's or the service's session cap is reached.
            NotFound / NotPlayable: the env cannot be played.
            PlayStartError: the env's server did not start or refused the session.
        """
        self._ensure_reaper()
        key = (tab, kind)
        current = self.sessions.get(key)
        if current is not None:
            if current.env_id == f"{owner}/{name}":
                current.touch()
                return current
            await self.close(tab, kind)
        if key in self._opening:
            raise PlayError("a session is already being started in this tab; wait a moment")
        self._opening[key] = visitor  # before any await: a second start in this tab waits for this one
        lease = ""
        try:
            if kind == "play":  # model tries are counted per run, by whoever starts one
                await self.check_rate("play", visitor)
            # Checked and reserved in one transaction, so simultaneous starts on every process all count.
            try:
                lease = await self._take_lease(visitor, kind, f"{owner}/{name}")
            except PlayLimit:
                # Sessions whose page went away are kept for a reload only while nobody needs the place.
                if not await self._drop_leaving(visitor):
                    raise
                lease = await self._take_lease(visitor, kind, f"{owner}/{name}")
            with self.factory() as db:
                target = resolve_target(db, self.settings, owner, name)
                description = _description(db, owner, name)
            if target.waking_from is not None:  # each stage it wakes through is its health too, at once
                target = await woken(
                    target, self.settings, on_wait, lambda stage: record_stage(self.factory, owner, name, stage)
                )
            try:
                instance = await self.pool.acquire(target)
            except AllInUse as full:
                raise self._in_line(visitor, full) from None
            self._line.pop(visitor, None)
            try:
                client, schema, reset_options = await self._connect(instance)
            except BaseException:
                await self.pool.release(instance)
                raise
            session = PlaySession(
                id=uuid.uuid4().hex[:12],
                tab=tab,
                kind=kind,
                visitor=visitor,
                env_id=f"{owner}/{name}",
                instance=instance,
                client=client,
                action_schema=schema,
                reset_options=reset_options,
                description=description,
                max_reply_mb=self.settings.play_max_reply_mb,
                release_grace_s=self.settings.play_release_grace_s,
                lease=lease,
                idle_timeout_s=self.settings.play_idle_timeout_s,
            )
            self.sessions[key] = session
            log.info("play session %s opened on %s (%s)", session.id, target.key, target.how)
            return session
        except BaseException:
            if lease:
                await self._release_lease(lease)
            raise
        finally:
            self._opening.pop(key, None)

    def attach(self, page: str, tab: str) -> None:
        """`page` (a page load) plays under `tab` (its browser tab's token): a session of `tab` whose
        page went away (a reload) is kept for this one."""
        if page and page != tab:
            self._pages[page] = tab
        pending = self._leaving.pop(tab, None)
        if pending is not None:
            pending.cancel()

    async def leave(self, page: str) -> None:
        """A page went away (closed or reloaded): its own sessions close now; those of its browser
        tab's token close after `play_resume_grace_s`, unless a page of that tab comes back first."""
        tab = self._pages.pop(page, None)
        await self.close(page)
        if tab is None or tab in self._pages.values() or tab in self._leaving:
            return
        grace = self.settings.play_resume_grace_s
        if grace <= 0:
            await self.close(tab)
            return

        async def close_later() -> None:
            await asyncio.sleep(grace)
            self._leaving.pop(tab, None)
            closed = await self.close(tab)
            if closed:
                log.info("play: %d session(s) closed %gs after their page went away", closed, grace)

        self._leaving[tab] = asyncio.get_running_loop().create_task(close_later())

    async def _drop_leaving(self, visitor: str) -> int:
        """Close the sessions kept after their page went away: this visitor's, else anyone's (a start
        needs the place more than a reload that may never come); returns how many were closed."""
        held = {tab for (tab, _), s in self.sessions.items() if tab in self._leaving and s.visitor == visitor}
        closed = 0
        for tab in held or set(self._leaving):
            self._leaving.pop(tab).cancel()
            closed += await self.close(tab)
        return closed

    def _in_line(self, visitor: str, full: AllInUse) -> AllInUse:
        """`full`, saying the visitor's place among those waiting and when a place may free up."""
        now = time.monotonic()
        # Sessions end when idle for play_idle_timeout_s: the soonest such end is the estimate.
        timeout = self.settings.play_idle_timeout_s
        wait_s = max(5.0, min((s.last_active + timeout - now for s in self.sessions.values()), default=timeout))
        forget = now - max(120.0, 2 * wait_s)  # whoever stopped asking has left the line
        self._line = {v: t for v, t in self._line.items() if t >= forget}
        self._line.setdefault(visitor, now)
        place = sorted(self._line, key=self._line.__getitem__).index(visitor) + 1
        minutes = max(1, round(wait_s / 60))
        return AllInUse(
            f"{full.message}, none idle: you are number {place} in line; "
            f"a place frees up within about {minutes} min (sooner when someone leaves). Press Reset again then."
        )

    async def check_rate(self, category: str, visitor: str) -> None:
        """Count one start (a play session, a model-try run) against the visitor's rate limit.

        Raises:
            PlayLimit: over the limit; the message says when to try again.
        """
        if self.limiter is None:
            return
        decision = await self.limiter.ahit(category, visitor)
        if not decision.allowed:
            what = "play sessions" if category == "play" else "model tries"
            raise PlayLimit(f"you have started too many {what} in a short time; try again in {decision.retry_after_s}s")

    def visitor_cap(self) -> int:
        """Sessions one visitor may hold: their own cap, and no more than their share of all."""
        share = max(1, int(self.settings.play_max_sessions * self.settings.play_visitor_share))
        return min(self.settings.play_max_sessions_per_visitor, share)

    async def _take_lease(self, visitor: str, kind: str, env_id: str) -> str:
        from sqlalchemy.exc import SQLAlchemyError

        from hub_service.quota.leases import CapReached

        try:
            return await asyncio.to_thread(
                self.leases.take,
                visitor,
                kind,
                env_id,
                max_total=self.settings.play_max_sessions,
                max_per_visitor=self.visitor_cap(),
            )
        except CapReached as full:
            if full.which == "total":
                raise PlayLimit(
                    f"all {self.settings.play_max_sessions} play sessions of this Hub are in use; "
                    "try again in a few minutes"
                ) from None
            raise PlayLimit(
                f"you already have {self.visitor_cap()} play sessions open or starting; "
                "close another tab (or wait for it to time out) first"
            ) from None
        except SQLAlchemyError as exc:
            log.warning("play: could not take a session lease: %s", exc)
            raise PlayError(
                "the Hub's database did not answer, so no session was started; try again in a moment"
            ) from exc

    async def _release_lease(self, lease: str) -> None:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            await asyncio.to_thread(self.leases.release, lease)
        except SQLAlchemyError:  # it stops counting when it expires all the same
            log.warning(
                "play: could not release lease %s; it expires in %gs", lease, self.leases.lease_s, exc_info=True
            )

    async def _connect(self, instance: Instance) -> tuple[Any, dict[str, Any], dict[str, Any] | None]:
        import httpx

        from openenv import GenericEnvClient
        from openenv.errors import OpenEnvError

        assert instance.url is not None
        timeout = self.settings.step_timeout_s
        limit_mb = self.settings.play_max_reply_mb
        try:
            async with httpx.AsyncClient(timeout=timeout, trust_env=False, follow_redirects=False) as http:
                async with http.stream("GET", instance.url.rstrip("/") + "/schema") as reply:
                    reply.raise_for_status()
                    body = await _read_capped(reply, int(limit_mb * (1 << 20)))
                if body is None:
                    raise PlayStartError(
                        f"{instance.target.key} did not accept a session: its /schema reply is larger than "
                        f"{limit_mb:g} MB (play_max_reply_mb); its author can slim it down"
                    )
                document = json.loads(body)
                schema = (document.get("action") if isinstance(document, dict) else None) or {}
                # What reset takes (servers of this SDK say; others do not, and are not checked)
                options = document.get("reset_options") if isinstance(document, dict) else None
            client = GenericEnvClient(
                instance.url, message_timeout_s=timeout, connect_timeout_s=timeout, max_message_size_mb=limit_mb
            )
            await client.connect()
        except (OpenEnvError, httpx.HTTPError, ValueError) as exc:
            raise PlayStartError(f"{instance.target.key} did not accept a session: {exc}") from exc
        return client, schema, options if isinstance(options, dict) else None

    async def close(self, tab: str, kind: str | None = None) -> int:
        """Close this tab's sessions (of `kind`, or all); returns how many were closed."""
        keys = [k for k in self.sessions if k[0] == tab and (kind is None or k[1] == kind)]
        for key in keys:
            await self._close(self.sessions.pop(key))
        return len(keys)

    async def _close(self, session: PlaySession) -> None:
        try:
            await session.client.close()
        except Exception:  # the env may be gone already; its instance is released all the same
            log.warning("closing play session %s failed", session.id, exc_info=True)
        await self.pool.release(session.instance)
        if session.lease:
            await self._release_lease(session.lease)
        log.info("play session %s closed", session.id)

    # -- upkeep ------------------------------------------------------------------------------

    async def reap(self) -> int:
        """Close sessions idle past the timeout and stop unused instances; returns sessions closed."""
        cutoff = time.monotonic() - self.settings.play_idle_timeout_s
        idle = [k for k, s in self.sessions.items() if s.last_active < cutoff and not s.lock.locked()]
        for key in idle:
            session = self.sessions.pop(key, None)
            if session is not None:
                log.info("play session %s idle for %.0fs: closing it", session.id, self.settings.play_idle_timeout_s)
                await self._close(session)
        await self.pool.reap()
        return len(idle)

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())
        if self._heartbeat is None or self._heartbeat.done():
            self._heartbeat = asyncio.get_running_loop().create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.leases.lease_s / 3)
            try:
                await asyncio.to_thread(self.leases.renew)
            except Exception:  # keep renewing: the database may answer again before the leases expire
                log.exception("renewing play session leases failed")

    async def _reap_forever(self) -> None:
        every = max(
            0.2, min(30.0, self.settings.play_idle_timeout_s / 4, self.settings.play_instance_linger_s / 2 or 30.0)
        )
        while True:
            await asyncio.sleep(every)
            try:
                await self.reap()
            except Exception:  # keep reaping: one failure must not leave the rest running
                log.exception("reaping play sessions failed")

    async def aclose(self) -> None:
        """Close every session and stop every instance (service shutdown)."""
        for task in (self._reaper, self._heartbeat, *self._leaving.values()):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        for key in list(self.sessions):
            await self._close(self.sessions.pop(key))
        await self.pool.aclose()

    def stats(self) -> dict[str, Any]:
        return {
            "sessions": len(self.sessions),
            "visitors": len({s.visitor for s in self.sessions.values()}),
            "instances": self.pool.running(),
        }


def _description(db: Session, owner: str, name: str) -> str:
    env = catalog.get_env(db, owner, name)
    return env.description or env.title or env.name
