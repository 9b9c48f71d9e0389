"""The typed client of the echo environment."""

from __future__ import annotations

from openenv import EnvClient

try:
    from .models import EchoAction, EchoObservation, EchoState
except ImportError:  # run from the env's folder, not as a package
    from models import EchoAction, EchoObservation, EchoState  # type: ignore[no-redef]


class EchoEnv(EnvClient[EchoAction, EchoObservation, EchoState]):
    """`async with EchoEnv("http://127.0.0.1:8000") as env: await env.step(EchoAction(message="hi"))`"""
