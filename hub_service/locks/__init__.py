"""Registering lock files (issue 23): every image a live lock names is kept from collection."""
