"""Checks that docs blocks of data name with `<!-- test: check tests.docs.checks:NAME -->`.

Each takes the block's text and raises when the example is not what the code produces: it must
validate against the real model, and have exactly the model's fields (no invented or stale keys).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

__all__ = ["lock_file", "resolve_record", "validate_report", "validate_report_v2"]


def _exact(model: type[BaseModel], data: dict[str, Any], where: str = "") -> None:
    model.model_validate(data)
    fields = set(model.model_fields)
    extra, missing = set(data) - fields, fields - set(data)
    assert not extra, f"{where or model.__name__}: the example has keys the model lacks: {sorted(extra)}"
    assert not missing, f"{where or model.__name__}: the example lacks the model's keys: {sorted(missing)}"


def resolve_record(text: str) -> None:
    """docs/hub-api.md's resolve reply is a `ResolveRecord`."""
    from hub_service.catalog.schemas import ResolveRecord

    _exact(ResolveRecord, json.loads(text))


def lock_file(text: str) -> None:
    """docs/providers.md's lock file reads as a `Lock` and is written back exactly as shown."""
    from openenv.client.lock import Lock

    lock = Lock.from_dict(json.loads(text), source="the example")
    assert lock.dumps() == text.strip() + "\n", "the example is not what `openenv lock` writes (key order, indent)"


def validate_report(text: str) -> None:
    """docs/validate.md's report is a `Report` whose checks are `CheckResult`s."""
    from openenv.validation.report import CheckResult, Report, Target

    data = json.loads(text)
    _exact(Report, data)
    _exact(Target, data["target"], "target")
    for check in data["checks"]:
        _exact(CheckResult, check, "a check")


def validate_report_v2(text: str) -> None:
    """docs/validate.md's RFC 008 report is a `ValidationReportV2` whose results are `ResultV2`s."""
    from openenv.validation.rfc008 import ResultV2, ValidationReportV2

    data = json.loads(text)
    _exact(ValidationReportV2, data)
    for result in data["results"]:
        _exact(ResultV2, result, "a result")
