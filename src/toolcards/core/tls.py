"""The TLS context outgoing HTTP clients verify servers with: the HTTP library's own default,
built once per process and shared by every client of that library.

Building a context reads the whole CA bundle (about 25 ms of CPU); an ``httpx`` client made
without one builds its own, so every MCP connection, web fetch, token refresh and key fetch paid
it. A context is shared safely between clients, threads and event loops; it is read from the
host's environment (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) when first asked for, so a CA bundle
changed later is seen by a new process.
"""

from __future__ import annotations

import ssl
import threading
from types import ModuleType

__all__ = ["default_verify"]

_contexts: dict[tuple[str, bool], ssl.SSLContext] = {}
_lock = threading.Lock()


def default_verify(http: ModuleType, *, trust_env: bool = True) -> ssl.SSLContext | bool:
    """``verify=`` for a client of ``http`` (``httpx`` or ``httpx2``) that verifies servers as
    the library does by default: the library's default context for ``trust_env``, made on the
    first call. ``True`` (a context per client, as before) for a library without a public
    ``create_ssl_context``."""
    make = getattr(http, "create_ssl_context", None)
    if make is None:
        return True
    key = (http.__name__, trust_env)
    with _lock:
        context = _contexts.get(key)
        if context is None:
            context = _contexts[key] = make(trust_env=trust_env)
        return context
