"""openenv.yaml: every form Spaces ship loads; nonsense is rejected with the line it is on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openenv.cli.schema import schema_text
from openenv.manifest import (
    Manifest,
    ManifestError,
    UnsupportedManifestError,
    inspect_manifest,
    load_manifest,
    manifest_json_schema,
    parse_manifest,
)
from tests.support.servers import ROOT

# The shapes of the manifests in upstream's envs and in Spaces (written here, not copied).
ACCEPTED = {
    "plain": "spec_version: 1\nname: echo_env\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n",
    "document marker": "---\nspec_version: 1\nname: maze_env\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n",
    "monorepo app path": "spec_version: 1\nname: grid_env\ntype: space\nruntime: fastapi\napp: envs.grid_env.server.app:app\nport: 8000\n",
    "old style with classes": 'spec_version: 1\nname: board_env\nversion: "0.1.0"\ndescription: "A board game"\ntype: space\n'
    "runtime: fastapi\napp: server.app:app\nport: 8000\naction: BoardAction\nobservation: BoardObservation\n",
    "no spec_version": 'name: four_env\nversion: "0.2.0"\ndescription: "Connect four"\naction: FourAction\nobservation: FourObservation\n',
    "extension blocks": (
        "spec_version: 1\nname: proof_env\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\n\n"
        'description: >\n  Grades proofs\n  with a rubric.\nversion: "0.1.0"\n\n# defaults\nenvironment:\n  model: judge-1\n  threshold: 0.5\n'
        'rubric:\n  type: llm_judge\n  scale: "0-7"\ntools:\n  - name: submit\n    description: Submit a proof\n'
        "metrics:\n  reward: [reward/base, reward/shaped]\n"
    ),
    "catalog style": (
        '---\nname: depot_env\nversion: "1.0.0"\ndescription: "Warehouse logistics"\nauthor: "Someone"\n'
        "tags:\n  - logistics\n  - grid-world\nenvironment:\n  type: discrete\n  action_space: {type: Discrete, n: 6}\n"
        "configuration:\n  environment_variables: [LEVEL, SEED]\ndocker:\n  image_name: depot-env\n  default_port: 8000\n"
    ),
    "env/python with validation block": (
        "spec_version: 1\nversion: 0.1.0\nname: served-min\ntype: env\nruntime: python\napp: server.app:app\nport: 8000\n"
        "validation:\n  reward:\n    range: [0.0, 1.0]\n  resources: {cpu: 1.0, memory_mb: 1024}\n"
    ),
    "float version, string port": 'spec_version: 1\nname: calc_env\nversion: 1.0\napp: server.app:app\nport: "8080"\n',
    "ours in full": (
        'spec_version: 1\nname: chess_env\ntype: space\nruntime: fastapi\napp: server.app:app\nport: 8000\nversion: "0.3.0"\n'
        "description: Chess against a fixed engine.\ntags: [openenv, games]\nvariables:\n  LEVEL: 3\n  OPENING: e4\n  FAST: true\n"
        "secrets: [OPENAI_API_KEY]\naction:\n  move: {type: string}\nobservation: ChessObservation\n"
    ),
}


@pytest.mark.parametrize("text", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_every_shipped_form_loads(text: str) -> None:
    found = inspect_manifest(text)
    assert found.errors == [], [p.format() for p in found.errors]
    assert found.manifest is not None and found.manifest.name


def test_values_are_normalized_and_extensions_kept() -> None:
    full = parse_manifest(ACCEPTED["ours in full"])
    assert full.variables == {"LEVEL": "3", "OPENING": "e4", "FAST": "true"}
    assert full.secrets == ["OPENAI_API_KEY"] and full.action == {"move": {"type": "string"}}
    proof = parse_manifest(ACCEPTED["extension blocks"])
    assert proof.description == "Grades proofs with a rubric.\n" and proof.version == "0.1.0"
    assert set(proof.extensions) == {"environment", "rubric", "tools", "metrics"}
    assert proof.extensions["rubric"]["scale"] == "0-7"
    calc = parse_manifest(ACCEPTED["float version, string port"])
    assert (calc.version, calc.port, calc.app_module, calc.app_attr) == ("1.0", 8080, "server.app", "app")


def test_a_manifest_without_spec_version_is_read_as_version_1_with_a_warning() -> None:
    found = inspect_manifest(ACCEPTED["no spec_version"])
    assert found.manifest is not None and found.manifest.effective_spec_version == 1
    assert found.manifest.app == "server.app:app" and found.manifest.port == 8000
    assert [w.code for w in found.warnings] == ["no_spec_version"]


# (text, rule code, field, line)
REJECTED = {
    "not yaml": ("spec_version: 1\nname: [unclosed\nport: 8000\n", "syntax", "", 3),
    "tab indentation": ("spec_version: 1\nvariables:\n\tA: 1\n", "syntax", "", 3),
    "a list": ("- name: x\n- port: 1\n", "not_mapping", "", 1),
    "empty": ("", "not_mapping", "", 1),
    "a bare string": ("just some words\n", "not_mapping", "", 1),
    "duplicate key": ("spec_version: 1\nname: a_env\nport: 8000\nname: b_env\n", "duplicate_key", "name", 4),
    "missing name": ("spec_version: 1\ntype: space\nport: 8000\n", "missing", "name", 1),
    "name with spaces": ("spec_version: 1\nname: my env\n", "invalid", "name", 2),
    "name read as a bool": ("spec_version: 1\nname: yes\n", "invalid", "name", 2),
    "unknown type": ("spec_version: 1\nname: x_env\ntype: banana\n", "invalid", "type", 3),
    "unknown runtime": ("spec_version: 1\nname: x_env\nruntime: django\n", "invalid", "runtime", 3),
    "app without attribute": ("spec_version: 1\nname: x_env\napp: server.app\n", "invalid", "app", 3),
    "app with a path": ("spec_version: 1\nname: x_env\napp: server/app.py:app\n", "invalid", "app", 3),
    "port out of range": ("spec_version: 1\nname: x_env\nport: 70000\n", "invalid", "port", 3),
    "port not a number": ("spec_version: 1\nname: x_env\nport: eighty\n", "invalid", "port", 3),
    "port is a bool": ("spec_version: 1\nname: x_env\nport: on\n", "invalid", "port", 3),
    "spec_version text": ("spec_version: one\nname: x_env\n", "invalid", "spec_version", 1),
    "spec_version zero": ("spec_version: 0\nname: x_env\n", "invalid", "spec_version", 1),
    "tags not a list": ("spec_version: 1\nname: x_env\ntags: openenv\n", "invalid", "tags", 3),
    "variables as a list": ("spec_version: 1\nname: x_env\nvariables:\n  - A=1\n", "invalid", "variables", 3),
    "variable nested": ("spec_version: 1\nname: x_env\nvariables:\n  A:\n    b: 1\n", "invalid", "variables.A", 4),
    "variable bad name": ("spec_version: 1\nname: x_env\nvariables:\n  bad-name: 1\n", "invalid", "variables", 3),
    "secrets with values": ("spec_version: 1\nname: x_env\nsecrets:\n  KEY: abc\n", "invalid", "secrets", 3),
    "secret bad name": ("spec_version: 1\nname: x_env\nsecrets: [my-key]\n", "invalid", "secrets", 3),
    "action a list": ("spec_version: 1\nname: x_env\naction: [1, 2]\n", "invalid", "action", 3),
    "description a mapping": ("spec_version: 1\nname: x_env\ndescription:\n  text: hi\n", "invalid", "description", 3),
}


@pytest.mark.parametrize(("text", "code", "field", "line"), REJECTED.values(), ids=REJECTED.keys())
def test_nonsense_is_rejected_at_its_line(text: str, code: str, field: str, line: int) -> None:
    found = inspect_manifest(text)
    assert found.manifest is None
    hits = [p for p in found.errors if p.code == code and p.field == field]
    assert hits, [(p.code, p.field, p.line, p.message) for p in found.errors]
    assert hits[0].line == line
    assert hits[0].format().startswith(f"openenv.yaml:{line}: ")
    with pytest.raises(ManifestError) as info:
        parse_manifest(text)
    assert f"openenv.yaml:{line}" in str(info.value)


def test_a_newer_spec_version_is_unsupported_not_invalid() -> None:
    with pytest.raises(UnsupportedManifestError, match="spec_version 7 is newer"):
        parse_manifest("spec_version: 7\nname: future_env\nsomething_new: {}\n")


def test_a_misspelled_key_is_a_warning_that_names_the_right_one() -> None:
    found = inspect_manifest("spec_version: 1\nname: x_env\nprot: 8001\n")
    assert found.manifest is not None and found.manifest.port == 8000
    assert [(w.code, w.field, w.line) for w in found.warnings] == [("unknown_key", "prot", 3)]
    assert "did you mean 'port'" in found.warnings[0].message


def test_load_manifest_names_the_file_and_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"no openenv\.yaml") as info:
        load_manifest(tmp_path)
    assert "openenv init" in str(info.value)
    (tmp_path / "openenv.yaml").write_text("spec_version: 1\nname: x_env\nport: 0\n")
    with pytest.raises(ManifestError, match=r"openenv.yaml:3: port"):
        load_manifest(tmp_path)
    (tmp_path / "openenv.yaml").write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_manifest(tmp_path)


def test_the_published_json_schema_is_current_and_describes_the_model() -> None:
    published = (ROOT / "docs" / "manifest.schema.json").read_text()
    assert published == schema_text("manifest"), "regenerate: openenv schema manifest > docs/manifest.schema.json"
    schema = json.loads(published)
    assert schema["required"] == ["name"] and schema["additionalProperties"] is True
    assert set(schema["properties"]) == set(Manifest.model_fields)
    assert manifest_json_schema()["properties"]["port"]["maximum"] == 65535
