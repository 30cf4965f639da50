"""The HTTP library the MCP client stack uses: ``httpx2`` with the mcp 2.x SDK (fastmcp 4),
``httpx`` with older ones. OAuth requests and error checks must use the same one."""

from __future__ import annotations

try:
    import httpx2 as http
except ImportError:  # pragma: no cover - mcp 1.x stacks
    import httpx as http  # type: ignore[no-redef]

HTTP_ERRORS: tuple[type[BaseException], ...] = (http.HTTPError,)
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (http.TransportError,)
if http.__name__ != "httpx":
    import httpx as _classic

    HTTP_ERRORS += (_classic.HTTPError,)
    TRANSPORT_ERRORS += (_classic.TransportError,)

__all__ = ["HTTP_ERRORS", "TRANSPORT_ERRORS", "http"]
