"""Settings of the Hub service, from `OPENENV_HUB_*` variables (and the HF ones for the Hub API)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["HubSettings", "get_settings"]

_REPO_ROOT = Path(__file__).resolve().parent.parent


def _default_local_source() -> str | None:
    envs = _REPO_ROOT / "envs"
    return str(envs) if envs.is_dir() else None


class HubSettings(BaseSettings):
    """Everything the service reads from its environment. Secrets are SecretStr: never logged."""

    model_config = SettingsConfigDict(env_prefix="OPENENV_HUB_", extra="ignore")

    data_dir: Path = Field(default=Path.home() / ".cache" / "openenv-hub", description="Where SQLite, fetched files and logs live.")
    database_url: str | None = Field(default=None, description="SQLAlchemy URL; SQLite under data_dir when unset.")
    public_url: str = Field(default="http://127.0.0.1:7860", description="How users reach this service (links in reports).")

    # Sources
    hf_enabled: bool = Field(default=False, description="Index Spaces from the Hugging Face Hub.")
    hf_endpoint: str | None = Field(default=None, description="Hub API base URL (HF_ENDPOINT); huggingface.co when unset.")
    hf_token: SecretStr | None = Field(default=None, description="Token for the Hub API (private Spaces, comments).")
    hf_tag: str = Field(default="openenv", description="Spaces with this tag are indexed.")
    hf_page_size: int = Field(default=1000, ge=1, le=1000)
    local_source: str | None = Field(default_factory=_default_local_source, description="A folder of Space-shaped env folders.")
    local_owner: str = Field(default="local", description="Owner name given to envs of the local source.")
    local_trusted: bool = Field(default=True, description="Local envs may run as processes (not only in containers).")
    space_image_template: str = Field(default="registry.hf.space/{owner}-{name}:latest", description="Image reference of a Space.")

    # Pipeline
    builder: Literal["auto", "docker", "process"] = "auto"
    base_image: str | None = Field(default=None, description="Value for the Dockerfiles' ARG BASE_IMAGE.")
    image_prefix: str = "openenv-hub"
    build_timeout_s: float = 900.0
    smoke_timeout_s: float = 120.0
    smoke_steps: int = Field(default=5, ge=1, le=1000)
    step_timeout_s: float = 10.0
    job_max_attempts: int = Field(default=3, ge=1)
    job_stale_after_s: float = Field(default=60.0, gt=0, description="A running job with no heartbeat this long is reclaimed.")
    heartbeat_s: float = Field(default=5.0, gt=0)
    embedded_workers: int = Field(default=1, ge=0, description="Workers `openenv hub serve` runs in-process.")

    # API
    page_size: int = Field(default=50, ge=1, le=500)
    maintainer_token: SecretStr | None = None

    # Website: play as a human, let a model try (sessions live in this process's memory)
    website: bool = Field(default=True, description="Serve the website at / (the API stays at /api/v1).")
    play_max_sessions: int = Field(default=16, ge=0, description="Play and model-try sessions at once, all visitors together.")
    play_max_sessions_per_visitor: int = Field(default=3, ge=1, description="Sessions one visitor (address) may hold at once.")
    play_max_instances: int = Field(default=4, ge=0, description="Env servers this service may run for visitors at once.")
    play_idle_timeout_s: float = Field(default=600.0, gt=0, description="A session unused this long is closed.")
    play_instance_linger_s: float = Field(default=60.0, ge=0, description="A started env with no sessions is stopped after this long.")
    play_start_timeout_s: float = Field(default=120.0, gt=0)
    try_max_episodes: int = Field(default=10, ge=1)
    try_max_steps: int = Field(default=100, ge=1, description="Steps per episode at most when a model plays.")
    llm_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint offered to visitors (HF Inference Providers, vLLM, TGI, Ollama).")
    llm_model: str | None = None
    llm_token: SecretStr | None = Field(default=None, description="Sent only to llm_base_url, never to an endpoint typed in the form.")
    llm_allow_custom_endpoint: bool = Field(default=True, description="Visitors may name their own endpoint in the form.")
    llm_timeout_s: float = Field(default=60.0, gt=0)

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @property
    def sqlalchemy_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'hub.sqlite3'}"

    @property
    def files_dir(self) -> Path:
        return self.data_dir / "files"


@functools.lru_cache(maxsize=1)
def get_settings() -> HubSettings:
    return HubSettings()
