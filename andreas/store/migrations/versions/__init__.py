"""One module per schema revision; Alembic skips this file."""
