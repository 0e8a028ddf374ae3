"""The node agent's daemon side: attribution, spool, delivery, store writer, CLI, install."""
