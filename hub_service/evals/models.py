"""The evals table: one scored run of a model (or the random baseline) on one revision."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import CheckConstraint, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from hub_service.db import Base, utcnow

__all__ = ["EVAL_SOURCES", "Eval"]

# baseline: the random policy the pipeline plays on every passing revision; website: a "let a
# model try" run; cli: an `openenv eval` submission (with a token).
EVAL_SOURCES = ("baseline", "website", "cli")


class Eval(Base):
    __tablename__ = "evals"
    __table_args__ = (
        Index("ix_evals_env_id_mean_return", "env_id", "mean_return"),
        CheckConstraint("source IN ('baseline', 'website', 'cli')", name="source"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    env_id: Mapped[int] = mapped_column(ForeignKey("environments.id", ondelete="CASCADE"))
    version_id: Mapped[int | None] = mapped_column(ForeignKey("env_versions.id", ondelete="SET NULL"), default=None)
    sha: Mapped[str] = mapped_column(String(64))  # the revision played (kept if the version row goes)
    source: Mapped[str] = mapped_column(String(16))
    model: Mapped[str] = mapped_column(String(256))  # "random" for the baseline
    endpoint_host: Mapped[str | None] = mapped_column(String(255), default=None)  # host of the model's base URL
    submitted_by: Mapped[str | None] = mapped_column(String(128), default=None)
    episodes: Mapped[int] = mapped_column(Integer)
    mean_return: Mapped[float] = mapped_column(Float)
    ci_low: Mapped[float] = mapped_column(Float)  # 95% interval of the mean return
    ci_high: Mapped[float] = mapped_column(Float)
    returns: Mapped[list[float]] = mapped_column()  # each episode's return
    created_at: Mapped[dt.datetime] = mapped_column(default=utcnow)
