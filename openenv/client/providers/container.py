"""`ContainerProvider`: an env image as a local container, on the container engine (Docker or Podman).

    async with ContainerProvider("echo-env:latest") as p:
        async with EchoEnv(p.base_url) as env: ...

    ContainerProvider.from_env_dir("envs/echo_env")   # builds the image first (openenv.images)

The container's port is published on 127.0.0.1 only (on an engine elsewhere, `DOCKER_HOST=tcp://...`,
on that engine's own address), on a port the engine picks (no race for a free port). Containers carry `org.openenv.*` labels (owner, start time, env) so `openenv ps`
and `lifecycle.gc()` find what a crashed client left behind. The image's own HEALTHCHECK is
not waited for: the provider polls `/health` itself, much more often than a healthcheck runs.
The engine is the one `openenv.engines` selects (Docker, or Podman's Docker-compatible API, by
OPENENV_CONTAINER_ENGINE); `runtime=` picks the OCI runtime (runc, gVisor's runsc).
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

from openenv.client import _settings
from openenv.client.providers import lifecycle
from openenv.client.providers._docker import docker_client, docker_errors
from openenv.client.providers.base import Provider
from openenv.engines import ContainerEngine, engine_of
from openenv.engines.runtimes import ObservedRuntime, observed_runtime
from openenv.errors import ConfigurationError, ProviderStartError

__all__ = ["ContainerProvider", "ImageDigestError", "container_name"]

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class ImageDigestError(ProviderStartError):
    """The image is not the one its digest names (a reference that disagrees with the digest, or an engine's
    image that does not carry it): nothing was run."""


def container_name(image: str) -> str:
    """A unique, readable container name: `<prefix>-<image name>-<random>`."""
    base = image.rsplit("/", 1)[-1].split("@", 1)[0].split(":", 1)[0]
    return f"{_settings.name_prefix()}-{re.sub(r'[^a-zA-Z0-9_.-]', '-', base)[:40]}-{uuid.uuid4().hex[:8]}"


class ContainerProvider(Provider):
    """Run an env image as a container with its port published on 127.0.0.1.

    Args:
        image: the image reference.
        port: the port the server listens on inside the container.
        env: environment variables for the container.
        host: the host interface the port is published on (default: 127.0.0.1 for an engine on
            this machine, the engine's own host for one elsewhere).
        pull: "missing" (pull when not present locally), "always", or "never".
        network: "bridge" (default: the engine's network, port published on `host`) or "host":
            the container shares the host's network and its server binds `host` on a free port
            given as $HOST / $PORT. Starts faster (no port proxy, no NAT rules) but only works for
            images whose server honours $HOST and $PORT, as ours (`python -m openenv.server`) do,
            and it weakens isolation (the env can reach services on the host's loopback).
        engine: the `openenv.engines.ContainerEngine` to run on (default: the one `docker_client`
            reaches, else the configured one).
        run_options: extra keyword arguments for the engine's container config
            (`docker.APIClient.create_host_config`), e.g. `{"mem_limit": "1g", "cpu_quota": 50000}`.
        docker_client: a `docker.DockerClient` (default: from DOCKER_HOST / the local socket).
        runtime: the engine's OCI runtime for the container, e.g. "runsc" (gVisor: the container's
            programs run on a kernel of gVisor's, not the host's); default OPENENV_CONTAINER_RUNTIME,
            else the engine's default. Refused before anything runs when the engine lacks it;
            `observed_runtime()` says what the container really got.
        **kwargs: `Provider` options (startup_timeout_s, stop_timeout_s, labels, name).
    """

    kind = "container"

    def __init__(
        self,
        image: str,
        *,
        port: int = 8000,
        env: dict[str, str] | None = None,
        host: str | None = None,
        pull: str = "missing",
        network: str = "bridge",
        run_options: dict[str, Any] | None = None,
        docker_client: Any = None,
        engine: Any = None,
        user: str | None = None,  # run as this user ("uid:gid"), e.g. "1000:1000" as a Space does
        digest: str | None = None,
        auth_config: dict[str, str] | None = None,
        runtime: str | None = None,
        **kwargs: Any,
    ) -> None:
        if not image or not isinstance(image, str):
            raise ConfigurationError("image must be an image reference such as 'echo-env:latest'")
        if pull not in ("missing", "always", "never"):
            raise ConfigurationError(f"pull must be 'missing', 'always' or 'never', not {pull!r}")
        if network not in ("bridge", "host"):
            raise ConfigurationError(f"network must be 'bridge' or 'host', not {network!r}")
        if digest is not None:
            if not _DIGEST.match(digest):
                raise ConfigurationError(f"digest must be sha256:<64 hex digits>, not {digest!r:.80}")
            if "@" not in image or image.rsplit("@", 1)[1] != digest:
                raise ImageDigestError(
                    f"refused {image}: the reference does not name the digest {digest} it is meant to carry; the record "
                    "that gave both was altered or is broken (ask the Hub's maintainers)"
                )
        super().__init__(**{"name": container_name(image), **kwargs})
        self.digest = digest
        self.auth_config = auth_config if auth_config is not None else _settings.registry_auth()
        self.network = network
        self.image = image
        self.port = port
        self.env = dict(env or {})
        self._host = host
        self.pull = pull
        self.run_options = dict(run_options or {})
        self.user = user
        self.runtime = runtime if runtime is not None else _settings.container_runtime()
        self._client = docker_client
        self._engine: ContainerEngine | None = engine
        self.container_id: str | None = None

    @classmethod
    def from_env_dir(
        cls,
        env_dir: str | Path,
        *,
        tag: str | None = None,
        base_image: str | None = None,
        sdk: str = "auto",
        build_args: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> ContainerProvider:
        """Build `env_dir`'s Dockerfile (with `openenv.images.build_image`, which puts the local SDK
        into images of envs in this repository) and return a provider for the image.

        Raises:
            openenv.images.ImageBuildError: the build failed (its log is attached).
        """
        from openenv.dockerfile import find_dockerfile
        from openenv.images import build_image

        folder = Path(env_dir).resolve()
        found = find_dockerfile(folder)
        tag = tag or f"{_settings.name_prefix()}-{re.sub(r'[^a-z0-9_.-]', '-', folder.name.lower())}:local"
        client = kwargs.get("docker_client") or docker_client()
        if "port" not in kwargs:
            from openenv.manifest import env_port

            kwargs["port"] = env_port(folder)
        build_image(
            folder,
            tag,
            base_image=base_image or _settings.base_image(),
            sdk=sdk,
            build_args=build_args,
            client=client,
            dockerfile=found.relative_to(folder).as_posix() if found else None,
        )
        return cls(tag, pull="never", **kwargs)

    @property
    def client(self) -> Any:
        if self._client is None:  # made at first use: constructing a provider reaches no engine
            self._client = self._engine.client() if self._engine is not None else docker_client()
        return self._client

    @property
    def engine(self) -> ContainerEngine:
        """The container engine this provider runs its container on (`openenv.engines`)."""
        if self._engine is None:
            self._engine = engine_of(self.client)
        return self._engine

    @property
    def host(self) -> str:
        """Where the container's port is published and reached: as given, else the engine's address
        (127.0.0.1 for an engine on this machine)."""
        return self._host or self.engine.address

    def _ensure_image(self) -> None:
        errors = docker_errors()
        api = self.client.api
        if self.digest is not None:
            self._ensure_digest(api)
            return
        if self.pull == "always" or (self.pull == "missing" and not _image_exists(api, self.image)):
            try:
                api.pull(self.image, auth_config=self.auth_config)
            except errors.DockerException as exc:
                raise ProviderStartError(
                    f"image {self.image} is not here and could not be pulled ({exc}); build it (openenv build) "
                    "or check the reference and your registry login"
                ) from None
        elif self.pull == "never" and not _image_exists(api, self.image):
            raise ProviderStartError(
                f"image {self.image} is not here (pull='never'); build it first, e.g. `openenv build`"
            )

    def _ensure_digest(self, api: Any) -> None:
        """Pull `repository@digest` when this engine lacks it (with `auth_config`, else docker's own login),
        then check that the engine's image carries exactly that digest.

        Raises:
            ProviderStartError: it could not be pulled.
            ImageDigestError: the engine's image does not carry the digest.
        """
        errors = docker_errors()
        repository = self.image.rsplit("@", 1)[0]
        if self.pull == "always" or not _image_exists(api, self.image):
            if self.pull == "never":
                raise ProviderStartError(f"image {self.image} is not here (pull='never'); pull it first")
            try:
                api.pull(repository, tag=self.digest, auth_config=self.auth_config)
            except errors.DockerException as exc:
                raise ProviderStartError(
                    f"image {self.image} is not here and could not be pulled by its digest ({exc}); check that its "
                    "registry is reachable from this machine and your credentials for it (OPENENV_REGISTRY_USER / "
                    "OPENENV_REGISTRY_PASSWORD, or docker login)"
                ) from None
        try:
            found = api.inspect_image(self.image).get("RepoDigests") or []
        except errors.ImageNotFound:
            found = []
        if f"{repository}@{self.digest}" not in found:
            raise ImageDigestError(
                f"refused {self.image}: the engine's image carries {found or 'no digest'}, not {self.digest}; "
                "nothing was run (remove the image from this engine and try again)"
            )

    def _launch(self) -> list[str]:
        api = self.client.api
        options = dict(self.run_options)
        if self.runtime:
            options.update(self.engine.runtime_options(api, self.runtime))
        options = self.engine.container_options(options)
        self._ensure_image()
        key = f"{self.port}/tcp"
        labels = lifecycle.owner_labels(self.image, self.labels)
        env = dict(self.env)
        if self.network == "host":
            from openenv.client.providers.process import free_port

            host_port = free_port(self.host)
            env.update(HOST=self.host, PORT=str(host_port))
            host_config = api.create_host_config(network_mode="host", **options)
            ports = None
        else:
            host_config = api.create_host_config(port_bindings={key: (self.host, None)}, **options)
            ports = [self.port]
        try:
            created = api.create_container(
                self.image,
                name=self.name,
                environment=env,
                labels=labels,
                ports=ports,
                host_config=host_config,
                detach=True,
                user=self.user or "",
            )
            self.container_id = created["Id"]
            api.start(self.container_id)
            if self.network == "host":
                return [f"http://{self.host}:{host_port}"]
            info = api.inspect_container(self.container_id)
        except docker_errors().APIError as exc:
            raise ProviderStartError(f"the engine could not run {self.image}: {exc.explanation or exc}") from None
        bindings = (info.get("NetworkSettings", {}).get("Ports") or {}).get(key) or []
        if not bindings:
            raise ProviderStartError(
                f"container {self.name} has no published port {key}; does {self.image} listen on {self.port}?"
            )
        return [f"http://{self.host}:{bindings[0]['HostPort']}"]

    def _terminate(self) -> None:
        cid, self.container_id = self.container_id, None
        if cid is None:
            return
        errors = docker_errors()
        api = self.client.api
        try:
            if self.stop_timeout_s > 0:
                api.stop(cid, timeout=int(max(1, self.stop_timeout_s)))
            api.remove_container(cid, force=True)
        except errors.NotFound:
            pass  # already removed (by gc, or by hand)

    def exit_reason(self) -> str | None:
        if self.container_id is None:
            return "not started"
        try:
            state = self.client.api.inspect_container(self.container_id)["State"]
        except docker_errors().NotFound:
            return f"container {self.name} was removed"
        if state.get("Running"):
            return None
        reason = f"container {self.name} is {state.get('Status')} (exit code {state.get('ExitCode')})"
        return f"{reason}: {state['Error']}" if state.get("Error") else reason

    def logs(self, tail: int = 200) -> str:
        if self.container_id is None:
            return ""
        try:
            raw: bytes = self.client.api.logs(self.container_id, tail=tail)
            return raw.decode(errors="replace")
        except docker_errors().NotFound:
            return ""

    def observed_runtime(self) -> ObservedRuntime:
        """The runtime the running container really got, checked on this host where the engine runs here.

        Raises:
            ProviderStartError: the container is not running.
        """
        if self.container_id is None:
            raise ProviderStartError(f"{self.name} is not running; start it first")
        return observed_runtime(self.client.api, self.container_id, self.engine)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "image": self.image,
            "digest": self.digest,
            "container": self.container_id,
            "runtime": self.runtime,
        }


def _image_exists(api: Any, image: str) -> bool:
    try:
        api.inspect_image(image)
    except docker_errors().ImageNotFound:
        return False
    return True
