"""Settings of andreas: one frozen object built from a TOML file and environment variables.

Where each setting comes from, highest priority first:

1. environment variables: ``ANDREAS_DB_URL``, ``ANDREAS_DB_PASSWORD_FILE``;
2. the TOML file ``$ANDREAS_CONFIG`` (must exist when set) or ``/etc/andreas/andreas.toml``
   (used when present);
3. defaults: an SQLite database at ``$XDG_DATA_HOME/andreas/andreas.db``
   (``~/.local/share/andreas/andreas.db`` when XDG_DATA_HOME is unset).

The file::

    [store]
    url = "mysql+pymysql://andreas_manager@db.example.org/andreas"
    password_file = "/etc/andreas/db-password"   # keeps the password out of the URL
    raw_retention_days = 7                        # raw samples kept, then 1-minute aggregates
    connect_retries = 5                           # daemons: tries at start, with back-off

Passwords never appear in messages or logs: print URLs through :func:`mask_url`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from andreas.errors import InputError

DEFAULT_CONFIG_PATH = Path("/etc/andreas/andreas.toml")
DEFAULT_RAW_RETENTION_DAYS = 7.0
DEFAULT_CONNECT_RETRIES = 5
ENV_CONFIG = "ANDREAS_CONFIG"
ENV_DB_URL = "ANDREAS_DB_URL"
ENV_DB_PASSWORD_FILE = "ANDREAS_DB_PASSWORD_FILE"

# Sections other components own are listed here as they are added; unknown ones are errors
# so that a typo does not silently fall back to a default.
_STORE_KEYS = {"url": str, "password_file": str, "raw_retention_days": (int, float),
               "connect_retries": int}
_SECTIONS: dict[str, dict[str, Any]] = {"store": _STORE_KEYS}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The resolved settings; ``*_source`` says where a value came from (for messages)."""

    db_url: str
    db_url_source: str
    db_password_file: str | None = None
    raw_retention_days: float = DEFAULT_RAW_RETENTION_DAYS
    connect_retries: int = DEFAULT_CONNECT_RETRIES
    config_path: str | None = None


def default_sqlite_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/andreas/andreas.db``, or ``~/.local/share/andreas/andreas.db``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME") or Path.home()) /
                                           ".local" / "share")
    return Path(base) / "andreas" / "andreas.db"


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the config file (if any) and the environment; every problem is one InputError."""
    env = os.environ if environ is None else environ
    explicit = env.get(ENV_CONFIG)
    path = Path(explicit) if explicit else DEFAULT_CONFIG_PATH
    data: dict[str, Any] = {}
    if explicit and not path.is_file():
        raise InputError(f"{ENV_CONFIG}={explicit}: config file not found")
    if path.is_file():
        data = read_toml(path, _SECTIONS)
    store = data.get("store", {})

    if env.get(ENV_DB_URL):
        url, source = env[ENV_DB_URL], ENV_DB_URL
    elif "url" in store:
        url, source = store["url"], f"{path} [store] url"
    else:
        url, source = f"sqlite:///{default_sqlite_path(env)}", "default"
    password_file = env.get(ENV_DB_PASSWORD_FILE) or store.get("password_file")
    days = float(store.get("raw_retention_days", DEFAULT_RAW_RETENTION_DAYS))
    if not days > 0:
        raise InputError(f"{path}: [store] raw_retention_days must be > 0, got {days:g}")
    retries = store.get("connect_retries", DEFAULT_CONNECT_RETRIES)
    if retries < 0:
        raise InputError(f"{path}: [store] connect_retries must be >= 0, got {retries}")
    return Settings(db_url=url, db_url_source=source, db_password_file=password_file,
                    raw_retention_days=days, connect_retries=retries,
                    config_path=str(path) if path.is_file() else None)


def read_toml(path: Path, sections: Mapping[str, Mapping[str, type]]) -> dict[str, Any]:
    """A config file checked against ``sections`` (section -> key -> type): unknown sections
    or keys and wrong types are one-line errors; a bool is accepted only where a bool is
    expected (TOML booleans are ints to Python)."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read config file: {e.strerror}") from None
    for section, value in data.items():
        if section not in sections:
            raise InputError(f"{path}: unknown section [{section}] "
                             f"(known: {', '.join(sorted(sections))})")
        if not isinstance(value, dict):
            raise InputError(f"{path}: '{section}' must be a table ([{section}])")
        keys = sections[section]
        for key, item in value.items():
            if key not in keys:
                raise InputError(f"{path}: [{section}] unknown key '{key}' "
                                 f"(known: {', '.join(sorted(keys))})")
            kind = keys[key]
            if (isinstance(item, bool) and kind is not bool) or not isinstance(item, kind):
                # A URL may hold a password: name its type only.
                shown = "a " + type(item).__name__ if key == "url" else repr(item)
                raise InputError(f"{path}: [{section}] {key} has the wrong type: {shown}")
    return data


def mask_url(url: Any) -> str:
    """The URL with its password replaced by ``***``; safe to print or log.

    Works on strings that are not valid URLs too: whatever stands between the first ':'
    after the scheme and the last '@' is treated as the password.
    """
    if not isinstance(url, str):
        try:
            return url.render_as_string(hide_password=True)
        except AttributeError:
            url = str(url)
    if "@" not in url:
        return url
    userinfo, rest = url.rsplit("@", 1)
    scheme_end = userinfo.find("://")
    start = scheme_end + 3 if scheme_end >= 0 else 0
    colon = userinfo.find(":", start)
    if colon < 0:
        return url
    return f"{userinfo[:colon]}:***@{rest}"
