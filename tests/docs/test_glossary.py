"""docs/glossary.md defines each of the Hub's nouns once: every closed list it shows is the list in
the code it names, and every closed vocabulary the database keeps is in it."""

from __future__ import annotations

import importlib
import re
import typing
from enum import StrEnum
from pathlib import Path

from sqlalchemy import CheckConstraint

from hub_service.db import Base
from hub_service.models import import_all

GLOSSARY = Path(__file__).resolve().parents[2] / "docs" / "glossary.md"


def _rows() -> list[tuple[str, list[str], str]]:
    """(word, values, defined in) of every table row of the glossary."""
    rows = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("word", "---"):
            continue
        rows.append((cells[0], re.findall(r"`([^`]+)`", cells[2]), cells[3].strip("`")))
    return rows


def _defined(dotted: str) -> object:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_every_list_in_the_glossary_is_the_codes() -> None:
    compared = 0
    for word, values, where in _rows():
        if not values or not where.startswith(("hub_service.", "openenv.")):
            continue
        found = _defined(where)
        listed = (
            [v.value for v in found]
            if isinstance(found, type) and issubclass(found, StrEnum)
            else list(typing.get_args(found))
        )
        assert values == listed, f"docs/glossary.md's {word!r} lists {values}, {where} holds {listed}"
        compared += 1
    assert compared >= 10


def test_every_vocabulary_the_database_keeps_is_in_the_glossary() -> None:
    import_all()
    shown = {tuple(values) for _, values, _ in _rows()}
    for table in Base.metadata.sorted_tables:
        for c in table.constraints:
            if isinstance(c, CheckConstraint) and "closed_vocabulary" in c.info:
                values = c.info["closed_vocabulary"][1]
                assert tuple(values) in shown, (
                    f"{table.name}.{c.info['closed_vocabulary'][0]} ({', '.join(values)}) is not in docs/glossary.md"
                )
