"""YAML from strangers (manifests, README front matter) is loaded safely and within limits."""

from __future__ import annotations

import pytest

from openenv._yaml import YamlLimitError, load_limited
from openenv.manifest import inspect_manifest
from openenv.validation._files import read_front_matter

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
)


def test_billion_laughs_is_refused_before_it_expands() -> None:
    with pytest.raises(YamlLimitError, match="more than"):
        load_limited(LAUGHS)
    found = inspect_manifest(LAUGHS)
    assert found.manifest is None and found.errors[0].code == "too_large"


def test_deep_nesting_and_size_are_refused() -> None:
    with pytest.raises(YamlLimitError, match="deeper"):
        load_limited("a: " + "[" * 100 + "]" * 100)
    assert inspect_manifest("name: x\n" + "# pad\n" * 60_000).errors[0].code == "too_large"


def test_python_objects_are_never_built() -> None:
    with pytest.raises(Exception, match="could not determine a constructor"):
        load_limited("x: !!python/object/apply:os.system ['echo pwned']")


def test_front_matter_limits() -> None:
    readme = "---\n" + LAUGHS + "---\n# hi\n"
    front = read_front_matter(readme)
    assert front.data is None and "too large or too deep" in front.error
