"""`from_hub`: find the fastest way to a live session of `owner/name[@revision]`.

Steps, each tried only when the one before gave nothing (docs/providers.md):

1. hub:     the configured OpenEnv Hub service's resolve record (OPENENV_HUB_URL): a live endpoint.
2. space:   the Space itself when its runtime runs (woken when asleep, waited for with a bound,
            each stage logged); one that answers 402 or is still asleep at the bound falls back,
            with a warning, to:
3. container: a local container: the Space's image (pulled with the user's HF login), else one
            built from its files at the revision.
4. process: a local process of the Space's files, in their own venv.

Steps 3 and 4 run the Space's code on this machine, so they need `trust_remote_code=True` (or
OPENENV_TRUST_REMOTE_CODE=1). Each step's outcome is logged when the next is tried and kept on
the error (`ResolutionError.attempts`) when none works. `owner/name@rev` pins a revision: the
running Space is used only when it serves that commit, and local steps use its files. A pin by
full sha or image digest (`@sha256:...`) is checked against the Hub's record, and a lock file
(`lock=`, OPENENV_LOCK) pins every env it names (openenv/client/lock.py): anything else raises
`LockMismatchError`, which no later step can mend. The step "docker" is the deprecated old name of
"container" (it warns; it goes in the next release).
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from openenv.client import _settings
from openenv.client._hub_service import HubServiceError, fetch_record
from openenv.client._signature import SignatureError, check_record_signature
from openenv.client.env_id import EnvId, parse_env_id
from openenv.client.launch import Launch, LaunchableClient, connect_with_provider, split_options
from openenv.client.lock import Lock, LockedEnv, load_lock
from openenv.client.providers._health import PaymentRequiredError, wait_healthy
from openenv.client.providers.base import in_thread
from openenv.dockerfile import find_dockerfile
from openenv.errors import ConfigurationError, LockMismatchError, OpenEnvError, RemoteCodeError, ResolutionError

__all__ = ["STEPS", "Resolver", "from_hub"]

log = logging.getLogger("openenv.resolve")

C = TypeVar("C", bound=LaunchableClient)
STEPS = ("hub", "space", "container", "process")
_REMOTE_STEPS = ("container", "process")
_RENAMED_STEPS = {"docker": "container"}  # old name → new; the old names go in the next release


def from_hub(
    cls: type[C],
    repo_id: str,
    revision: str | None = None,
    *,
    trust_remote_code: bool | None = None,
    steps: Sequence[str] | None = None,
    wake_timeout_s: float | None = None,
    health_timeout_s: float = 15.0,
    hub_url: str | None = None,
    lock: str | Path | Lock | None = None,
    **options: Any,
) -> Launch[C]:
    """See `EnvClient.from_hub`. Options: client ones (token, message_timeout_s, ...) go to the
    client; the rest to the local provider (env, startup_timeout_s, ...). `hub_url`: the OpenEnv
    Hub service to ask first (default: OPENENV_HUB_URL, else the lock's Hub). `lock`: a lock file
    (default: OPENENV_LOCK) whose revision, image digest and protocol version the client keeps to."""
    env_id = parse_env_id(repo_id, revision)
    locked_by = load_lock(lock)
    locked = locked_by.entry(env_id) if locked_by is not None else None
    if locked is not None and locked_by is not None:
        env_id = EnvId(env_id.owner, env_id.name, locked.revision)
        hub_url = hub_url or (None if _settings.hub_url() else locked_by.hub)
    chosen = tuple(map(_step_name, steps)) if steps is not None else STEPS
    unknown = [s for s in chosen if s not in STEPS]
    if unknown or not chosen:
        raise ConfigurationError(f"steps must be a non-empty choice of {STEPS}, got {list(chosen)}")
    trusted = _settings.trust_remote_code() if trust_remote_code is None else trust_remote_code
    client_options, provider_options = split_options(options)
    resolver = Resolver(
        cls,
        env_id,
        steps=chosen,
        trust_remote_code=trusted,
        client_options=client_options,
        provider_options=provider_options,
        health_timeout_s=health_timeout_s,
        hub_url=hub_url,
        wake_timeout_s=_settings.space_wake_timeout_s() if wake_timeout_s is None else wake_timeout_s,
        pin=env_id.revision if env_id.pinned else None,
        lock=locked_by,
        locked=locked,
    )
    return Launch(resolver.run)


class Resolver:
    """One `from_hub` call: tries the steps in order, remembering what each found."""

    def __init__(
        self,
        cls: type[Any],
        env_id: EnvId,
        *,
        steps: Sequence[str],
        trust_remote_code: bool,
        client_options: dict[str, Any],
        provider_options: dict[str, Any],
        wake_timeout_s: float,
        health_timeout_s: float,
        hub_url: str | None = None,
        pin: str | None = None,
        lock: Lock | None = None,
        locked: LockedEnv | None = None,
    ) -> None:
        self.cls = cls
        self.env_id = env_id
        self.steps = steps
        self.trusted = trust_remote_code
        self.client_options = client_options
        self.provider_options = provider_options
        self.wake_timeout_s = wake_timeout_s
        self.health_timeout_s = health_timeout_s
        self.hub_url = hub_url.rstrip("/") if hub_url else None
        self.attempts: list[tuple[str, str]] = []
        self.pin = pin  # the full sha or image digest the id pins, checked against the Hub's record
        self.lock = lock
        self.locked = locked  # the lock's entry for this env: every step keeps to it
        self.record: Any = None  # the Hub service's resolve record, when step 1 got one
        self.record_from = ""  # and the Hub service that gave it
        self._api: Any = None
        self._facts: Any = None
        self._files: Any = None

    # -- the run ----------------------------------------------------------------------------------------

    async def run(self) -> Any:
        """Returns a connected client; raises ResolutionError / RemoteCodeError when no step works."""
        for step in self.steps:
            if self.attempts:
                last_step, outcome = self.attempts[-1]
                log.info("from_hub %s: %s: %s; trying %s", self.env_id, last_step, outcome, step)
            if step in _REMOTE_STEPS and not self.trusted:
                self.attempts.append(
                    (step, "skipped: it would run the Space's code on this machine (trust_remote_code is off)")
                )
                continue
            try:
                client = await getattr(self, f"_{step}")()
            except LockMismatchError:
                raise  # the lock's word is final: no other step may give something else
            except _Fatal as exc:
                self.attempts.append((step, str(exc)))
                break
            except _Fallback as exc:  # said out loud: the user waited, or expected the Space itself
                self.attempts.append((step, str(exc)))
                later = self.steps[self.steps.index(step) + 1 :]
                then = "falling back to its image (step container)" if "container" in later else "no image step follows"
                log.warning("from_hub %s: %s; %s", self.env_id, exc, then)
                continue
            except OpenEnvError as exc:
                self.attempts.append((step, _first_line(exc)))
                continue
            if client is not None:
                if self.locked is not None:
                    try:
                        self.locked.check_protocol(client.server_protocol, client.base_url)
                    except LockMismatchError:
                        await client.close()
                        raise
                log.info("from_hub %s: connected through %s (%s)", self.env_id, step, client.base_url)
                client.resolution = [*self.attempts, (step, f"connected to {client.base_url}")]
                client.hub_info = self.record  # the Hub service's record (its capacity card), or None
                return client
        raise self._failure()

    def _failure(self) -> ResolutionError:
        lines = "\n".join(f"  {step}: {outcome}" for step, outcome in self.attempts)
        needs_trust = any(outcome.startswith("skipped: it would run") for _, outcome in self.attempts)
        if needs_trust:
            return RemoteCodeError(
                f"{self.env_id} is not running anywhere it can be reached, and running it locally would execute "
                f"its code on this machine. If you trust it, pass trust_remote_code=True (or set "
                f"OPENENV_TRUST_REMOTE_CODE=1).\n{lines}",
                attempts=self.attempts,
            )
        return ResolutionError(f"no way to run {self.env_id} was found:\n{lines}", attempts=self.attempts)

    def _headers(self, url: str) -> dict[str, str]:
        token = self.client_options.get("token") or (_settings.hf_token() if _settings.is_hf_host(url) else None)
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def _connect_url(self, url: str, timeout_s: float) -> Any:
        await wait_healthy(url, timeout_s=timeout_s, headers=self._headers(url))
        client = self.cls(url, **self.client_options)
        await client.connect()
        return client

    # -- step 1: the OpenEnv Hub service ----------------------------------------------------------------

    async def _hub(self) -> Any:
        hub = self.hub_url or _settings.hub_url()
        if hub is None:
            raise _Skip("skipped: no OpenEnv Hub service configured (OPENENV_HUB_URL)")
        try:
            # No HF token to a third-party service: it only says where the env runs.
            lock_id = self.lock.id if self.lock is not None else None
            record = await in_thread(
                lambda: fetch_record(hub, self.env_id.repo_id, self.env_id.revision, token=None, lock=lock_id)
            )
        except HubServiceError as exc:
            raise _Skip(str(exc)) from None
        self._check_record(hub, record)
        self.record, self.record_from = record, hub
        if self.env_id.digest is not None:
            raise _Skip(f"a digest pin runs its image {record.image or '(none listed)'}, not the running Space")
        if record.url is None:
            raise _Skip(
                f"the service knows it ({record.status or 'no status'}, stage {record.stage or '?'}) but lists no running endpoint"
            )
        try:
            return await self._connect_url(record.url, self.health_timeout_s)
        except OpenEnvError as exc:
            raise _Skip(f"its endpoint {record.url} did not answer: {_first_line(exc)}") from None

    def _check_record(self, hub: str, record: Any) -> None:
        """A pinned id or a lock must get exactly what it pins (LockMismatchError / _Fatal otherwise)."""
        digest = record.image_digest
        if self.locked is not None:
            self.locked.check_record(record.sha, digest, hub)
            if self.lock is not None and record.raw.get("lock_expires_at") is None:
                log.warning(
                    "%s does not hold lock %s (%s): it may collect the locked images; re-run `openenv lock` to "
                    "register it again",
                    hub,
                    self.lock.id[:12],
                    self.lock.source,
                )
        elif self.pin is not None and self.pin not in (record.sha, digest):
            raise _Fatal(
                f"{hub} resolved {self.env_id} to {record.sha} (image {digest or 'none'}), not the pinned "
                f"{self.pin}; a pin always names the same image: check the Hub, or drop the pin"
            )

    # -- step 2: the Space ------------------------------------------------------------------------------------

    async def _space_facts(self) -> Any:
        if self.env_id.digest is not None:
            raise _Skip(
                "a digest pin runs only the image with that digest, which an OpenEnv Hub service's record names "
                "(OPENENV_HUB_URL); the Space's runtime, image and files are not it"
            )
        if self._facts is None:
            from openenv.client import _space

            self._api = self._api or _space.hf_api()
            try:
                self._facts = await in_thread(_space.space_facts, self._api, self.env_id.repo_id, self.env_id.revision)
            except Exception as exc:
                raise _hub_error(exc, self.env_id) from None
        return self._facts

    async def _space(self) -> Any:
        from openenv.client import _space

        facts = await self._space_facts()
        if self.env_id.revision and facts.sha != facts.head_sha:
            raise _Skip(
                f"the Space runs {(facts.head_sha or '?')[:12]}, not the pinned revision {self.env_id.revision} ({(facts.sha or '?')[:12]})"
            )
        if facts.url is None:
            raise _Skip("the Hub gives no URL for the Space (no domains, no subdomain)")
        stage = facts.stage
        note = ""
        try:
            if stage in _space.ASLEEP or stage in _space.STARTING:
                if stage in _space.ASLEEP:
                    note = await _space.rouse(self._api, self.env_id.repo_id, facts.url, self._headers(facts.url))
                stage = await self._wait_for_space(facts.stage or "?", note)
            if stage not in _space.RUNNING:
                raise _Skip(f"the Space is {stage}" + (": paused by its owner" if stage == "PAUSED" else ""))
            timeout = self.health_timeout_s if not note else max(self.health_timeout_s, self.wake_timeout_s)
            return await self._connect_url(facts.url, timeout)
        except PaymentRequiredError:
            raise _Fallback(_space.payment_required(facts.url)) from None

    async def _wait_for_space(self, was: str, note: str) -> str:
        """Wait (at most wake_timeout_s) for a sleeping or starting Space to run, logging each stage the
        Hub reports; returns the stage it runs in. Raises _Fallback when it is still not up by then."""
        from openenv.client import _space

        bound = self.wake_timeout_s
        log.warning(
            "from_hub %s: the Space is %s (%s); waiting up to %gs for it to run (wake_timeout_s, %s)",
            self.env_id,
            was,
            note or "starting",
            bound,
            _settings.SPACE_WAKE_TIMEOUT_VAR,
        )

        def heard(stage: str, waited_s: float) -> None:
            log.info("from_hub %s: the Space is %s (%.1fs of at most %gs)", self.env_id, stage, waited_s, bound)

        stage = await in_thread(_space.wait_for_stage, self._api, self.env_id.repo_id, bound, heard)
        if stage in _space.RUNNING:
            return stage
        said = f"the Space was {was} and is {stage} after {bound:g}s ({note or 'waited'})"
        if stage in _space.ASLEEP or stage in _space.STARTING:
            raise _Fallback(f"{said}: still not running after wake_timeout_s ({_settings.SPACE_WAKE_TIMEOUT_VAR})")
        raise _Skip(said)

    # -- steps 3 and 4: run it here -----------------------------------------------------------------------------

    async def _space_files(self) -> Any:
        if self._files is None:
            from openenv.client import _space

            facts = await self._space_facts()
            if not facts.sha:
                raise _Fatal("the Hub gives no commit for the Space; cannot download its files")
            try:
                self._files = await in_thread(_space.download_space, self._api, self.env_id.repo_id, facts.sha)
            except Exception as exc:
                raise _hub_error(exc, self.env_id) from None
        return self._files

    async def _container(self) -> Any:
        from openenv.client._space_image import pull_space_image
        from openenv.client.providers._docker import docker_client
        from openenv.client.providers.container import ContainerProvider, ImageDigestError, _image_exists

        # The engine the caller chose (docker_client=...), else DOCKER_HOST's / the local socket's.
        client: Any = self.provider_options.get("docker_client") or await in_thread(docker_client)
        notes: list[str] = []
        record = self.record
        if record is None and self.locked is not None and self.locked.image_digest and self.locked.image:
            # No Hub answered: the locked image by its digest is the only one known to be the locked one.
            options = {"digest": self.locked.image_digest, **self.provider_options}
            try:
                provider = ContainerProvider(self.locked.image, pull="missing", **options)
                return await connect_with_provider(self.cls, provider, self.client_options)
            except ImageDigestError as exc:  # not the locked image: nothing else may stand in for it
                raise _Fatal(f"{self.locked.image} (from the lock file): {_first_line(exc)}") from None
        if record is not None and record.image:
            # The Hub service's record names an image (one it built and checked, or the Space's) and its port:
            # enough to run it here, even when the Hugging Face Hub cannot be reached (an intranet Hub).
            options = {"port": record.port, **self.provider_options}
            if record.image_digest:  # the Hub pushed it to its registry: pulled by digest here and checked
                options.setdefault("digest", record.image_digest)
                try:  # and signed by the Hub: its signature is checked before anything is pulled
                    checked = await in_thread(
                        check_record_signature,
                        self.record_from,
                        record.image,
                        record.image_digest,
                        record.raw.get("signature"),
                    )
                except SignatureError as exc:  # not the image the Hub signed: no other step may stand in for it
                    raise _Fatal(str(exc)) from None
                log.info("from_hub %s: %s: %s", self.env_id, record.image, checked)
            try:
                return await connect_with_provider(
                    self.cls, ContainerProvider(record.image, pull="missing", **options), self.client_options
                )
            except ImageDigestError as exc:  # not the image the Hub tested: no other step may stand in for it
                raise _Fatal(f"{record.image} (from the Hub service): {_first_line(exc)}") from None
            except OpenEnvError as exc:
                notes.append(f"{record.image} (from the Hub service): {_first_line(exc)}")
        try:
            facts = await self._space_facts()
        except OpenEnvError as exc:
            if notes:
                raise _Skip("; ".join([*notes, _first_line(exc)])) from None
            raise
        owner, name = self.env_id.owner.lower(), self.env_id.name.lower()
        local_tag = f"{_settings.name_prefix()}-space-{_slug(owner)}-{_slug(name)}:{(facts.sha or 'head')[:12]}"
        candidates: list[tuple[str, str]] = []
        if await in_thread(_image_exists, client.api, local_tag):
            candidates.append((local_tag, "never"))
        elif not self.env_id.revision or facts.sha == facts.head_sha:
            template = _settings.space_image_template()
            reference = template.format(
                owner=owner,
                name=name.replace("_", "-"),
                subdomain=_subdomain(owner, name),
                revision=facts.sha or "latest",
            )
            candidates.append((reference, "missing"))
        for image, pull in candidates:
            try:
                if pull == "missing":  # the Space's own image, from the Hub's registry: with the user's HF login
                    await in_thread(pull_space_image, client.api, image, self._api)
                    pull = "never"
                return await connect_with_provider(
                    self.cls, ContainerProvider(image, pull=pull, **self.provider_options), self.client_options
                )
            except OpenEnvError as exc:
                notes.append(f"{image}: {_first_line(exc)}")
        folder = await self._space_files()
        if find_dockerfile(folder) is None:
            raise _Skip("; ".join([*notes, "the Space has no Dockerfile to build"]))
        try:
            provider = await in_thread(
                lambda: ContainerProvider.from_env_dir(
                    folder, tag=local_tag, base_image=_settings.base_image(), **self.provider_options
                )
            )
            return await connect_with_provider(self.cls, provider, self.client_options)
        except OpenEnvError as exc:
            raise _Skip("; ".join([*notes, f"built {local_tag} from the Space's files: {_first_line(exc)}"])) from None

    async def _process(self) -> Any:
        from openenv.client.providers.process import ProcessProvider

        folder = await self._space_files()
        return await connect_with_provider(
            self.cls, ProcessProvider(folder, **self.provider_options), self.client_options
        )


def _step_name(step: str) -> str:
    """A step by its name, an old name warning (DeprecationWarning, at the caller of
    `EnvClient.from_hub`) and giving the new one."""
    new = _RENAMED_STEPS.get(step)
    if new is None:
        return step
    warnings.warn(
        f"the step {step!r} is deprecated, use {new!r}; the alias goes in the next release",
        DeprecationWarning,
        stacklevel=4,
    )
    return new


class _Skip(OpenEnvError):
    """This step found nothing; the message is its outcome."""


class _Fallback(_Skip):
    """The Space cannot be used (it answers 402, or stays asleep past the wait): said as a warning, since
    the user expected it, and the next step (its image) is tried."""


class _Fatal(OpenEnvError):
    """No later step can work either (e.g. the repo does not exist)."""


def _hub_error(exc: Exception, env_id: EnvId) -> OpenEnvError:
    kind = type(exc).__name__
    if kind == "RepositoryNotFoundError":
        return _Fatal(
            f"no Space {env_id.repo_id} on the Hub ({_settings.hf_endpoint()}), or it is private and no token "
            "was given (HF_TOKEN); check the id"
        )
    if kind == "RevisionNotFoundError":
        return _Fatal(f"the Space {env_id.repo_id} has no revision {env_id.revision!r}")
    if isinstance(exc, OpenEnvError):
        return exc
    return _Skip(f"the Hub could not be asked ({kind}: {_first_line(exc)})")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9_.-]+", "-", text.lower()).strip("-.") or "x"


def _subdomain(owner: str, name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{owner}-{name}".lower()).strip("-")
