"""The one rule for a database server or a file that data names (an agent spec, a config an
agent may have written): the host's credentials and files never go where data says.

libpq completes a URL with what the host holds (``PGPASSWORD``, ``~/.pgpass``, a service or
key file named by an option), so a URL from data must carry its own password and no options,
name one server as libpq reads it too (never a list of hosts, never a socket folder), and name
a host of this host's private network only when the host's trust allows that network. A file
data names lies in data's own folder, links followed (:func:`check_own_file`). The surfaces
that read data (``surfaces.agent``, ``surfaces.config``) share this module, so no door checks
less than another.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from toolcards.core.trust import HostTrust, UntrustedField, private_host
from toolcards.stores.location import StoreLocation

_URL_KEYS = frozenset({"user", "password", "host", "port", "dbname"})


def check_data_location(
    field: str,
    where: StoreLocation,
    trust: HostTrust | None,
    *,
    who: str,
    instead: str,
    grant: str | None = None,
) -> None:
    """UntrustedField when ``where`` (a shared location that data named in ``field``) could
    take the host's credentials elsewhere than it says; a file or ``:memory:`` passes.

    The refusal is one line without the password: ``who`` may not choose this, do ``instead``
    (or, for a private host, ``grant``)."""
    if not where.shared:
        return
    parts = urlsplit(where.target)
    if not parts.password or "?" in where.target or "#" in where.target:  # libpq: no fragment
        raise UntrustedField(
            f"{field} {where.display!r} names a database without its own password or with "
            f"options, and {who} may not choose where the host's credentials and files "
            f"(PGPASSWORD, ~/.pgpass, a service or key file) go: write user:password@host/db, "
            f"or {instead}"
        )
    host = parts.netloc.rpartition("@")[2]
    one = parts.netloc.count("@") == 1 and "," not in host and "%" not in host
    if not one or not _libpq_reads_alike(where.target, parts.hostname):
        raise UntrustedField(
            f"{field} {where.display!r} names several hosts or a local socket, and {who} "
            f"names one server by its host name or address: {instead}"
        )
    if private_host(where.target) and not HostTrust.of(trust).private_network:
        raise UntrustedField(
            f"{field} {where.display!r} names a host of this host's private network, and "
            f"{who} may not choose that: {grant or instead}"
        )


def check_own_file(folder: Path, value: str, field: str, *, who: str, instead: str) -> Path:
    """The real path of the file ``value`` (relative to ``folder``, where data lies) that data
    named in ``field``; UntrustedField when it lies outside ``folder``, links followed: the
    host's files (its audit trail, its stores, its policy) are not data's to open, write or
    read. The refusal is one line: the file lies outside ``who``'s folder (or is no path: a
    ``~user`` this host has no home folder for, a NUL character), then ``instead``."""
    own = folder.resolve()
    try:
        path = Path(value).expanduser()
        real = (path if path.is_absolute() else own / path).resolve()
    except (RuntimeError, ValueError):
        raise UntrustedField(
            f"{field} {value!r:.200} names no file on this host; {instead}"
        ) from None
    if not real.is_relative_to(own):
        raise UntrustedField(f"{field} {value!r:.200} lies outside {who}'s folder; {instead}")
    return real


def _libpq_reads_alike(url: str, host: str | None) -> bool:
    """Whether libpq reads ``url`` as :func:`urlsplit` did: one server, ``host``, and no key
    but those a plain URL spells (a list of hosts, a socket folder, an option smuggled past
    the URL's own reading is another server than the one checked)."""
    try:
        from psycopg.conninfo import conninfo_to_dict  # lazy: the postgres extra
    except ImportError:  # without it no PostgreSQL store opens either
        return True
    try:
        read = conninfo_to_dict(url)
    except Exception:
        return False
    return set(read) <= _URL_KEYS and str(read.get("host", "")).lower() == (host or "").lower()
