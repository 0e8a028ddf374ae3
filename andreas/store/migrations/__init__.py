"""Alembic migration environment of the store (package data; driven by andreas.store.migrate)."""
