"""`openenv schema manifest|report`: print a JSON Schema (what docs/ publishes)."""

from __future__ import annotations

import argparse
import json

from openenv.cli._output import Output

DESCRIPTION = "Print the JSON Schema of openenv.yaml (manifest) or of `openenv validate --json` (report)."
EXAMPLES = """
openenv schema manifest > docs/manifest.schema.json
openenv schema report
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("which", choices=["manifest", "report"], help="which schema")


def schema_text(which: str) -> str:
    """The schema as the JSON text published in docs/ (stable key order, trailing newline)."""
    if which == "manifest":
        from openenv.manifest import manifest_json_schema

        schema = manifest_json_schema()
    else:
        from openenv.validation.report import report_json_schema

        schema = report_json_schema()
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def run(args: argparse.Namespace, out: Output) -> int:
    out.stdout.write(schema_text(args.which))
    return 0
