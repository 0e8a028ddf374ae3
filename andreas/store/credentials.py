"""Who the caller is and the password they bring, without SQLAlchemy (stdlib only): the
effective OS user (the owner of a submission on SQLite) and the database password file,
shared by the store's engine and the quick submission path (:mod:`andreas.store.quick`).
"""

from __future__ import annotations

import logging
import os
import pwd
import stat

from andreas.infra.fileio import read_text_capped

log = logging.getLogger("andreas.store.engine")


def os_user() -> str:
    """The effective OS user's name (its uid when the passwd database has no entry)."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def read_password_file(path: str) -> str:
    """The password in a file (one line); a warning when the group or others may read it,
    since the password is then everyone's on that machine."""
    label = f"database password file {path}"
    secret = read_text_capped(path, what="password file", limit=4096, label=label)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if mode & 0o077:
        log.warning("%s is readable or writable by its group or others (mode %04o); "
                    "chmod 600 it", label, stat.S_IMODE(mode))
    return secret.rstrip("\r\n")
