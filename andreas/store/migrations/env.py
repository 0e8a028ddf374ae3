"""Alembic environment: runs on the connection that ``andreas.store.migrate`` passes in.

Offline mode (``andreas db upgrade --sql``) renders the DDL for the dialect passed in
``config.attributes["dialect_name"]``.
"""

from __future__ import annotations

from alembic import context

from andreas.store.models import Base

config = context.config
target_metadata = Base.metadata

if context.is_offline_mode():
    context.configure(dialect_name=config.attributes["dialect_name"],
                      target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    connection = config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("run migrations through `andreas db upgrade` "
                           "(andreas.store.migrate), which passes the connection")
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite",
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
