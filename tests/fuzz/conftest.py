"""The hub fuzz test uses the hub database fixtures."""

from tests.hub.conftest import _databases, clean_factory, db_url, engine, hub_settings  # noqa: F401  (fixtures)
