"""Settings of the Hub service, from `OPENENV_HUB_*` variables (and the HF ones for the Hub API)."""

from __future__ import annotations

import functools
import logging
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# What upstream's catalog profile (0.1-draft) admits as a publisher and as a source.
_DNS = re.compile(r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,63}$")
_GITHUB_GIT = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\.git$")

__all__ = ["HubSettings", "get_settings"]

_REPO_ROOT = Path(__file__).resolve().parent.parent


def _default_local_source() -> str | None:
    envs = _REPO_ROOT / "envs"
    return str(envs) if envs.is_dir() else None


class HubSettings(BaseSettings):
    """Everything the service reads from its environment. Secrets are SecretStr: never logged."""

    model_config = SettingsConfigDict(env_prefix="OPENENV_HUB_", extra="ignore")

    data_dir: Path = Field(
        default=Path.home() / ".cache" / "openenv-hub", description="Where SQLite, fetched files and logs live."
    )
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; SQLite under data_dir when unset.")
    public_url: str = Field(
        default="http://127.0.0.1:7860", description="How users reach this service (links in reports)."
    )
    catalog_publisher: str | None = Field(
        default=None,
        description=(
            "DNS name that publishes the catalog snapshot (its entries' `urn:air:<publisher>:` ids); "
            "the public_url host when that is a DNS name, else openenv-hub.localhost."
        ),
    )
    catalog_source_uri: str = Field(
        default="https://github.com/openenv-hub/catalog.git",
        description=(
            "GitHub HTTPS Git URI the catalog snapshot names as its source (upstream's 0.1-draft profile "
            "admits only GitHub sources; each entry's real Space, revision and image are in its metadata.hub)."
        ),
    )
    catalog_shard_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=16 * 1024,
        le=16 * 1024 * 1024,
        description=(
            "Largest catalog snapshot document the Hub serves, in bytes: a larger catalog is served in "
            "shards of at most this size, named by GET /api/v1/catalog/index. At most 16 MiB, the most "
            "upstream OpenEnv's `openenv discover` reads."
        ),
    )
    catalog_shards_keep_s: float = Field(
        default=600.0,
        ge=0,
        description=(
            "How long after its index was last read a catalog revision's shards are still served as that index "
            "names them, though the catalog has changed since (later: 409 catalog_changed). Shards are kept on "
            "disk under <data_dir>/catalog-shards, one folder per revision, at most 4 folders."
        ),
    )

    # Sources
    hf_enabled: bool = Field(default=False, description="Index Spaces from the Hugging Face Hub.")
    hf_endpoint: str | None = Field(
        default=None, description="Hub API base URL (HF_ENDPOINT); huggingface.co when unset."
    )
    hf_token: SecretStr | None = Field(default=None, description="Token for the Hub API (private Spaces, comments).")
    hf_tag: str = Field(default="openenv", description="Spaces with this tag are indexed.")
    hf_crawl_wait_max_s: float = Field(
        default=300.0,
        ge=0,
        description=(
            "Seconds one crawl of the Hub may spend waiting as its 429 / 503 replies ask (Retry-After); a wait "
            "past what is left stops the crawl, and the next index pass resumes at the page it stopped on."
        ),
    )
    hf_full_crawl_every_s: float = Field(
        default=0.0,
        ge=0,
        description=(
            "Between full crawls of the Hub this far apart, an index pass is incremental: it reads the listing newest "
            "first and stops where the last complete pass began, so it costs what changed, not the Hub's size. Only a "
            "full crawl finds Spaces that are gone and refreshes what changes no commit (likes, stage). 0: every "
            "pass is a full crawl."
        ),
    )
    local_source: str | None = Field(
        default_factory=_default_local_source, description="A folder of Space-shaped env folders."
    )
    local_owner: str = Field(default="local", description="Owner name given to envs of the local source.")
    local_trusted: bool = Field(default=True, description="Local envs may run as processes (not only in containers).")
    space_image_template: str = Field(
        default="registry.hf.space/{owner}-{name}:latest", description="Image reference of a Space."
    )

    # Pipeline
    builder: Literal["auto", "container", "process"] = Field(
        default="auto",
        description=(
            "How revisions are built: 'container' (an image on the container engine, Docker or Podman), 'process' "
            "(trusted sources only), or 'auto' (container when an engine answers). 'docker' is the deprecated old "
            "name of 'container' (it logs a warning; it goes in the next release)."
        ),
    )
    base_image: str | None = Field(default=None, description="Value for the Dockerfiles' ARG BASE_IMAGE.")
    image_prefix: str = "openenv-hub"
    build_timeout_s: float = 900.0
    smoke_timeout_s: float = 120.0
    smoke_steps: int = Field(default=5, ge=1, le=1000)
    step_timeout_s: float = 10.0
    smoke_deadline_s: float = Field(
        default=600.0,
        gt=0,
        description=(
            "Wall-clock limit of the whole smoke stage (start, calls, runtime checks); past it the server is stopped and the revision fails."
        ),
    )
    stage_deadline_s: float = Field(
        default=1800.0,
        gt=0,
        description=(
            "Wall-clock limit of each of the fetch, validate and build stages (keep it above build_timeout_s)."
        ),
    )
    engine_answer_s: float = Field(
        default=10.0,
        gt=0,
        description=(
            "When a stage on the container engine runs past its deadline, the engine is asked (over a new connection) "
            "whether it still answers and has not restarted; no answer within this long makes the revision wait for "
            "the engine instead of failing."
        ),
    )
    first_work_budget_s: float = Field(
        default=60.0,
        gt=0,
        description="hub.time_to_first_work (RFC 008): the most a revision's cold start may take, from its container's start to its first reset's reply.",
    )
    rfc008_gate: Literal["off", "declared", "all"] = Field(
        default="declared",
        description=(
            "Whether RFC 008's verdict decides a revision's: a check of severity `fail` that fails fails the revision "
            "(at the validate stage for the static level, at the smoke stage for the rest). `declared`: for envs whose "
            "openenv.yaml has a `validation:` block (they opted in to RFC 008); `all`: every env (one without the "
            "block fails static.manifest); `off`: the report is kept beside the Hub's verdict and decides nothing. "
            "An `error` (the check could not judge) and a `skip` never fail a revision."
        ),
    )
    statistical_episodes: int = Field(
        default=16,
        ge=0,
        le=1000,
        description="RFC 008's statistical level: episodes of each policy it plays on a revision (0: the level is off).",
    )
    statistical_episode_steps: int = Field(
        default=30, ge=1, le=100, description="The statistical level cuts an episode after this many steps."
    )
    statistical_budget_s: float = Field(
        default=60.0,
        gt=0,
        description="The statistical level's time in all, per revision; a check short of episodes then says skip.",
    )
    cross_host_engine: str | None = Field(
        default=None,
        description="hub.cross_host_determinism (RFC 008): a second container engine, on another machine (a "
        "DOCKER_HOST address: unix://, tcp://, ssh://), where each revision's image is copied and its plan played "
        "from the same seed; unset, the check says skip.",
    )
    smoke_reply_max_mb: float = Field(
        default=4.0, gt=0, description="Largest HTTP reply (e.g. /schema) the smoke test reads from an env server."
    )
    smoke_message_max_mb: float = Field(
        default=100.0, gt=0, description="Largest WebSocket reply the smoke test accepts from an env server."
    )
    smoke_memory: str = Field(default="1g", description="Memory limit of a smoke-test container.")
    smoke_cpus: float = Field(default=1.0, gt=0)
    smoke_pids: int = Field(default=256, ge=16)
    smoke_file_size_mb: int = Field(default=256, ge=1, description="Largest file a smoke container may write.")
    smoke_tmpfs_mb: int = Field(default=256, ge=1)
    smoke_isolated_network: bool = Field(default=True, description="Smoke containers reach nothing but their own port.")
    sandbox_runtime: str = Field(
        default="runc",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="The engine's OCI runtime for containers of code the Hub did not write (smoke tests, play "
        "sessions): 'runc', or 'runsc' for gVisor (a kernel of its own between the code and the host's; "
        "scripts/docker-engine registers it). Checked on the host for every container: the smoke log says what it got.",
    )

    # Trust checks (hub_service/pipeline/trust.py), run at the end of the smoke stage on its server
    trust_check_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description="Wall-clock limit of each trust check; past it the check is recorded as unchecked.",
    )
    capacity_check: bool = Field(
        default=True, description="Measure the capacity card: memory per session, sessions held."
    )
    capacity_max_sessions: int = Field(
        default=64, ge=1, description="Top of the ramp of concurrent sessions (1, 2, 4, ...)."
    )
    capacity_p99_ms: float = Field(
        default=100.0, gt=0, description="A ramp level fails when its p99 step latency is over this."
    )
    capacity_budget_s: float = Field(
        default=5.0, gt=0, description="Time the ramp of concurrent sessions may take in all."
    )
    capacity_steps: int = Field(default=3, ge=1, le=100, description="Steps each session takes at each ramp level.")
    capacity_memory_sessions: int = Field(
        default=8, ge=1, le=256, description="Sessions opened at once to measure memory per session."
    )
    capacity_leak_sessions: int = Field(
        default=32,
        ge=1,
        le=1000,
        description="Sessions opened and closed one at a time to see that sessions are released.",
    )
    trust_release_grace_s: float = Field(
        default=5.0,
        ge=0,
        description=(
            "How long a trust check's new session (and each session of the capacity ramp) waits while the server "
            "still answers CAPACITY_REACHED for sessions closed a moment before; the ramp reports that wait apart "
            "(release_s), never as less capacity or against capacity_budget_s."
        ),
    )
    determinism_check: bool = Field(default=True, description="Play the same seed and actions twice and compare.")
    determinism_steps: int = Field(default=10, ge=1, le=1000)
    reward_check: bool = Field(
        default=True, description="Random-policy baseline and reward probes (empty, oversized answers)."
    )
    reward_check_episodes: int = Field(default=5, ge=1, le=1000)
    reward_check_episode_steps: int = Field(
        default=50, ge=1, description="An episode of the random policy is cut (capped) after this many steps."
    )
    reward_check_max_steps: int = Field(default=200, ge=1, description="Steps of the random policy in all.")
    reward_check_budget_s: float = Field(default=5.0, gt=0, description="Time the random policy may play in all.")
    build_memory: str = Field(default="2g", description="Memory limit of a build's RUN steps.")
    build_network: str | None = Field(
        default=None,
        description=(
            "The engine's network for a build's RUN steps, overriding build_egress (BuildKit takes 'none', 'default' or 'host')."
        ),
    )
    build_egress: bool = Field(
        default=True,
        description=(
            "Builds' RUN steps may reach the network (registries, PyPI) through the engine's bridge; off: they reach nothing "
            "(BuildKit cannot keep them off the host's services otherwise)."
        ),
    )
    build_block_host: bool = Field(
        default=True,
        description=(
            "With egress, builds' RUN steps still cannot open connections to this host's services (an iptables rule on the "
            "engine's default bridge, in the Hub's own chain, removed when it stops; needs root)."
        ),
    )
    build_pids: int = Field(
        default=1024,
        ge=64,
        description="Processes a build's RUN steps may run at once (BuildKit: all builds together).",
    )
    image_max_mb: int = Field(default=6144, ge=1, description="Images larger than this fail the build.")
    reproducible_build_check: bool = Field(
        default=False,
        description="static.reproducible_build (RFC 008): build every revision a second time, from scratch, and "
        "compare the two images layer by layer (it doubles the build stage's time; off, the check says skip).",
    )
    keep_images_per_env: int = Field(
        default=2,
        ge=0,
        description=(
            "Images of older passing main revisions kept per env, besides its current revision's and open pull requests' "
            "(for clients pinned to them); the other images the Hub built are removed after each job of the env."
        ),
    )
    lock_ttl_days: int = Field(
        default=90,
        ge=1,
        le=365,
        description=(
            "Days a registered lock file (`openenv lock`) keeps the images it names; registering it again or resolving "
            "through it starts the count again."
        ),
    )
    fetch_max_mb: int = Field(default=512, ge=1, description="Revisions with more files than this fail the fetch.")
    lock_max_per_user: int = Field(
        default=20, ge=1, description="Live lock files one Hugging Face user may have registered at once."
    )
    collect_every_s: float = Field(
        default=3600.0,
        ge=0,
        description="Collect images nobody keeps (engine and registry) and purge expired locks this often (0: never).",
    )
    registry_gc: Literal["off", "dry_run", "delete"] = Field(
        default="dry_run",
        description=(
            "Images of the registry that nothing keeps: `dry_run` plans and audits their deletion only (read the "
            "plan first), `delete` deletes their manifests by digest, `off` leaves the registry alone."
        ),
    )
    leader_lease_s: float = Field(
        default=30.0,
        ge=1,
        description=(
            "The periodic duties (crawl, health poll, collection) run in one Hub process, the holder of a lease in "
            "the database; another process takes over this long after the holder stops renewing it."
        ),
    )

    # Registry (hub_service/pipeline/publish.py): where passing images go, so other machines can pull them
    registry: str | None = Field(
        default=None,
        description=(
            "OCI registry `host[:port][/namespace]` the publish stage pushes each tested image to, as "
            "`<registry>/<owner>/<name>:<sha>`; the resolve record then names it by digest. Unset: images stay in "
            "this machine's engine."
        ),
    )
    registry_user: str | None = Field(default=None, description="User the Hub pushes to the registry as.")
    registry_password: SecretStr | None = Field(default=None, description="That user's password (or token).")
    registry_timeout_s: float = Field(
        default=600.0, gt=0, description="Wall-clock limit of one push; past it the revision waits for the registry."
    )
    signing_key_file: Path | None = Field(
        default=None,
        description=(
            "PEM PKCS#8 EC P-256 private key the publish stage signs each image with (cosign's format, "
            "hub_service/signing.py). Unset: the Hub makes one in <data_dir>/signing/cosign.key and keeps it."
        ),
    )
    job_max_attempts: int = Field(default=3, ge=1)
    infra_retry_s: float = Field(
        default=15.0,
        gt=0,
        description=(
            "A revision stopped by the infrastructure (no engine, engine restarted, base image or source unreachable) runs again "
            "after this long, doubling with each retry..."
        ),
    )
    infra_retry_max_s: float = Field(
        default=300.0, gt=0, description="...up to this long (sooner when the container engine answers again)."
    )
    infra_probe_s: float = Field(
        default=5.0,
        gt=0,
        description="How often an idle worker checks whether the engine that revisions wait for answers again.",
    )
    infra_wait_max_count: int = Field(
        default=60,
        ge=1,
        description=(
            "A revision given back this many times for the infrastructure fails instead, with its last wait's stage, code "
            "and reason (`openenv hub rerun` runs it again): no wait is endless..."
        ),
    )
    infra_wait_max_s: float = Field(
        default=6 * 3600.0, gt=0, description="...nor longer than this since the revision's run first waited."
    )
    job_stale_after_s: float = Field(
        default=60.0, gt=0, description="A running job with no heartbeat this long is reclaimed."
    )
    heartbeat_s: float = Field(default=5.0, gt=0)
    embedded_workers: int = Field(default=1, ge=0, description="Workers `openenv hub serve` runs in-process.")

    # API
    page_size: int = Field(
        default=50, ge=1, description="Environments a listing gives when it is not asked for a `limit`."
    )
    # Bounds of a listing's request: each one past its bound is a 400 that names the setting, checked
    # before any query runs (docs/hub-api.md, Bounds).
    page_size_max: int = Field(default=500, ge=1, description="The largest `limit` a listing takes.")
    list_offset_max: int = Field(
        default=10_000, ge=0, description="The deepest `offset` a listing takes; deeper pages are reached by cursor."
    )
    search_max_chars: int = Field(default=200, ge=1, description="Characters of a search (`q`) at most...")
    search_max_words: int = Field(default=8, ge=1, description="...and words.")
    filter_max_values: int = Field(
        default=16,
        ge=1,
        description="Values of one repeatable filter (`tag`, `capability`, `task`, `check`) at most...",
    )
    filter_max_chars: int = Field(default=128, ge=1, description="...and characters of each value.")
    max_body_bytes: int = Field(default=1 << 20, ge=1024, description="Larger request bodies get 413.")
    rate_api_burst: int = Field(default=120, ge=1, description="API requests a client may make at once...")
    rate_api_per_minute: float = Field(default=600, gt=0, description="...and per minute after that.")
    rate_webhook_burst: int = Field(default=60, ge=1)
    rate_webhook_per_minute: float = Field(default=600, gt=0)
    rate_play_burst: int = Field(default=10, ge=1, description="Play sessions a visitor may start at once...")
    rate_play_per_minute: float = Field(default=20, gt=0)
    rate_model_burst: int = Field(default=3, ge=1, description="Model-try runs a visitor may start at once...")
    rate_model_per_minute: float = Field(default=6, gt=0)
    limits_db_timeout_s: float = Field(
        default=2.0,
        gt=0,
        description=(
            "PostgreSQL: a rate-limit hit waits this long at most for the database (connecting, locks); "
            "past it the request is counted in this process only."
        ),
    )
    limits_db_retry_s: float = Field(
        default=5.0,
        gt=0,
        description="After the database failed a rate-limit hit, count in this process only for this long, then ask it again.",
    )
    trust_forwarded_for: bool = Field(
        default=False, description="Take the client address from X-Forwarded-For (behind a proxy)."
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1", description="Proxies whose X-Forwarded-For is believed, when trusted."
    )
    maintainer_token: SecretStr | None = Field(
        default=None, description="Bearer token for maintainer actions (re-run, yank, deprecate)."
    )

    # Keeping the index live
    webhook_secret: SecretStr | None = Field(
        default=None,
        description="The Hub webhook's secret (X-Webhook-Secret header or ?secret=); webhooks are refused while unset.",
    )
    webhook_replay_window_s: float = Field(
        default=10.0,
        ge=0,
        description=(
            "A byte-identical delivery for the same repo within this many seconds, with nothing else for that "
            "repo in between, is answered `duplicate` (a retry or a Replay click). Anything else is applied."
        ),
    )
    pr_bot: bool = Field(
        default=True, description="Check pull requests on indexed Spaces and comment the verdict (needs hf_token)."
    )
    health_poll_s: float = Field(
        default=300.0, ge=0, description="Poll the runtime stage of indexed Spaces this often (0: never)."
    )

    # Website: play as a human, let a model try (sessions live in this process's memory; the caps are shared)
    website: bool = Field(default=True, description="Serve the website at / (the API stays at /api/v1).")
    play_max_sessions: int = Field(
        default=16, ge=0, description="Play and model-try sessions at once, all visitors together."
    )
    play_max_sessions_per_visitor: int = Field(
        default=3, ge=1, description="Sessions one visitor (address) may hold at once."
    )
    play_max_instances: int = Field(
        default=4, ge=0, description="Env servers this service may run for visitors at once."
    )
    play_idle_timeout_s: float = Field(default=600.0, gt=0, description="A session unused this long is closed.")
    play_lease_s: float = Field(
        default=30.0,
        ge=1,
        description=(
            "Play sessions count against the caps of every Hub process through leases in the database, renewed "
            "every third of this; a process that dies stops counting this long after."
        ),
    )
    play_instance_linger_s: float = Field(
        default=60.0, ge=0, description="A started env with no sessions is stopped after this long."
    )
    play_start_timeout_s: float = Field(default=120.0, gt=0)
    play_space_wake_timeout_s: float = Field(
        default=120.0,
        ge=0,
        description=(
            "How long a visitor's start waits for a sleeping (or starting) Space of the Hugging Face Hub to run, "
            "after asking it to wake; past it, or at once when the Space answers 402 Payment Required, the "
            "visitor plays the env's image on this Hub instead (when it has one), and is told so."
        ),
    )
    play_release_grace_s: float = Field(
        default=3.0,
        ge=0,
        description=(
            "How long a visitor's reset waits while the env's server still answers CAPACITY_REACHED: a server frees a "
            "closed session's place a moment after, and a visitor starting again at once is not told it is full."
        ),
    )
    play_resume_grace_s: float = Field(
        default=60.0,
        ge=0,
        description=(
            "How long a visitor's play session outlives the page that held it (a reload, a tab closed): a page of "
            "the same browser tab that comes back within it resumes the episode; past it the session is closed."
        ),
    )
    try_max_episodes: int = Field(default=10, ge=1)
    try_max_steps: int = Field(default=100, ge=1, description="Steps per episode at most when a model plays.")
    llm_base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible endpoint offered to visitors (HF Inference Providers, vLLM, TGI, Ollama).",
    )
    llm_model: str | None = None
    llm_token: SecretStr | None = Field(
        default=None, description="Sent only to llm_base_url, never to an endpoint typed in the form."
    )
    llm_allowed_endpoints: list[str] = Field(
        default_factory=list,
        description=(
            "Further base URLs visitors may pick (a JSON list); like llm_base_url they are trusted and may be private."
        ),
    )
    llm_allow_custom_endpoint: bool = Field(
        default=False,
        description=(
            "Visitors may type any endpoint; the Hub then calls it only when every address of its host is public."
        ),
    )
    llm_timeout_s: float = Field(default=60.0, gt=0)
    play_max_reply_mb: float = Field(
        default=4.0, gt=0, description="Largest reply read from an env server in play or a model try."
    )
    play_visitor_share: float = Field(
        default=0.25,
        gt=0,
        le=1,
        description=(
            "Share of play_max_sessions one visitor may hold (at least one), on top of play_max_sessions_per_visitor."
        ),
    )
    rate_web_burst: int = Field(
        default=60, ge=1, description="Website events (clicks, searches) a visitor may send at once..."
    )
    rate_web_per_minute: float = Field(default=300, gt=0)
    web_cache_max_age_s: int = Field(
        default=3600, ge=60, description="Files the website's framework caches are deleted after this long."
    )

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("builder", mode="before")
    @classmethod
    def _builder(cls, value: object) -> object:
        if value == "docker":  # the old name of "container", until the next release
            logging.getLogger("hub_service.settings").warning(
                "OPENENV_HUB_BUILDER=docker is deprecated, use OPENENV_HUB_BUILDER=container (the same builder, on "
                "whichever container engine is set); the old name goes in the next release"
            )
            return "container"
        return value

    @model_validator(mode="after")
    def _page_fits(self) -> HubSettings:
        if self.page_size > self.page_size_max:
            raise ValueError(
                f"page_size ({self.page_size}) must be at most page_size_max ({self.page_size_max}): "
                "a listing without a `limit` would be refused"
            )
        return self

    @property
    def sqlalchemy_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'hub.sqlite3'}"

    @field_validator("catalog_publisher")
    @classmethod
    def _publisher(cls, value: str | None) -> str | None:
        if value is not None and not _DNS.match(value):
            raise ValueError(f"catalog_publisher must be a DNS name such as hub.example.org, not {value!r}")
        return value

    @field_validator("catalog_source_uri")
    @classmethod
    def _catalog_source(cls, value: str) -> str:
        if not _GITHUB_GIT.match(value):
            raise ValueError(
                f"catalog_source_uri must be a GitHub HTTPS Git URI such as https://github.com/org/catalog.git, "
                f"not {value!r}"
            )
        return value

    @field_validator("registry")
    @classmethod
    def _registry(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if "://" in value or "@" in value or any(c.isspace() for c in value):
            raise ValueError(
                f"registry must be host[:port][/namespace] (e.g. 127.0.0.1:5000 or registry.example.com/openenv), "
                f"not {value!r}"
            )
        return value

    @property
    def files_dir(self) -> Path:
        return self.data_dir / "files"


@functools.lru_cache(maxsize=1)
def get_settings() -> HubSettings:
    return HubSettings()
