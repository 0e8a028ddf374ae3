"""The store's contract suite (SQLite and MariaDB); a package so module names stay unique."""
