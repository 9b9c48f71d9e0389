"""RFC 008 validation (upstream OpenEnv 0.10.0's contract): check ids, levels, lanes, the severity
policy, the normalized manifest and the version 2 report. docs/validate.md has the table of all
46 check ids and what this SDK runs for each."""

from __future__ import annotations

from openenv.validation.rfc008.manifest import ManifestBlockError, NormalizedManifest, NormalizedManifestV2, normalize
from openenv.validation.rfc008.policy import (
    DEFAULT_POLICY,
    LEVEL_NAMES,
    POLICY_VERSIONS,
    Level,
    Policy,
    PolicyError,
    load_policy,
    parse_level,
)
from openenv.validation.rfc008.report import (
    ResultV2,
    ValidationReportV2,
    check_summary,
    read_check_summary,
    source_digest,
)
from openenv.validation.rfc008.run import UnsupportedTarget, validate_package

__all__ = [
    "DEFAULT_POLICY",
    "LEVEL_NAMES",
    "POLICY_VERSIONS",
    "Level",
    "ManifestBlockError",
    "NormalizedManifest",
    "NormalizedManifestV2",
    "Policy",
    "PolicyError",
    "ResultV2",
    "UnsupportedTarget",
    "ValidationReportV2",
    "check_summary",
    "load_policy",
    "normalize",
    "parse_level",
    "read_check_summary",
    "source_digest",
    "validate_package",
]
