"""One canonical form of a model-supplied URL, or a refusal the model can read.

The canonical form is what the SSRF guard checks and what is sent (to Tavily or fetched), so
no later parser reads the URL differently: numeric IPv4 spellings (``0177.0.0.1``,
``0x7f000001``, ``2130706433``, ``127.1``) become dotted quads the way URL parsers and
``inet_aton`` read them, non-ASCII host names are mapped (UTS #46) to ASCII, and everything
that does not parse cleanly is refused rather than guessed.

The path and query are normalised as RFC 3986 6.2.2 says (escaped unreserved characters
decoded, other escapes in upper case, dot segments removed) and runs of ``/`` in the path
merged, so ``/%68r/x``, ``/public/%2e%2e/hr/x`` and ``//hr/x`` are decided as the ``/hr/x``
the server serves for them. Escaped ``/`` and ``\\`` in the path are refused: servers differ
on whether they split the path there. So is ``;`` (raw or escaped): Tomcat and Spring read it
as the start of a path parameter and drop it, serving ``/hr;x/a`` and ``/public/..;/hr/a`` as
``/hr/a``.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from toolcards.core.errors import ToolcardsError

MAX_URL_CHARS = 8_192
"""Longer URLs are refused."""
MAX_HOST_CHARS = 253
_MAX_IPV4_PART = 12
"""The longest part of a numeric IPv4 host (``037777777777``); ``int`` raised a bare
ValueError on one of more than 4,300 digits."""
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
_HIDDEN_CATEGORIES = ("Cc", "Cf", "Co", "Cs", "Zl", "Zp", "Zs")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_STRAY_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class URLRefused(ToolcardsError, ValueError):
    """The URL is not allowed or not usable; the message says why (safe to show to a model)."""


@dataclass(frozen=True)
class ParsedURL:
    """A URL in canonical form."""

    url: str
    """The canonical URL text (no fragment): what is checked and what is sent."""
    host: str
    """The ASCII host, lower case; an IPv6 address without brackets."""
    port: int
    """The explicit port, or the scheme's default."""
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    """The host as an address when it is one (in any spelling), else None."""


def normalize_url(url: object) -> ParsedURL:
    """``url`` in canonical form; URLRefused naming the problem when it cannot be used."""
    text = _clean_text(url)
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise URLRefused(f"the URL is malformed ({_first_line(exc)})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise URLRefused(f"only http and https URLs are allowed, not {scheme or 'no scheme'!r}")
    if "@" in parts.netloc:
        raise URLRefused("URLs with credentials or '@' in the host part are not allowed")
    if port == 0:
        raise URLRefused("the URL's port must be between 1 and 65535")
    bracketed = parts.netloc.startswith("[")
    raw_host = (parts.hostname or "").rstrip(".") if not bracketed else parts.hostname or ""
    if not raw_host:
        raise URLRefused("the URL has no host")
    if "%" in raw_host:
        what = "IPv6 zone ids" if bracketed else "percent-encoded host names"
        raise URLRefused(f"{what} are not allowed in URLs")
    host, address = _ipv6_host(raw_host) if bracketed else _named_host(raw_host)
    return _rebuild(parts, scheme, host, port, address)


def _clean_text(url: object) -> str:
    if not isinstance(url, str):
        raise URLRefused(f"the URL must be a string, not {type(url).__name__}")
    text = url.strip()
    if not text:
        raise URLRefused("the URL is empty")
    if len(text) > MAX_URL_CHARS:
        raise URLRefused(f"the URL is longer than {MAX_URL_CHARS} characters")
    if any(unicodedata.category(ch) in _HIDDEN_CATEGORIES for ch in text):
        raise URLRefused("the URL contains whitespace, control or invisible characters")
    if "\\" in text:
        raise URLRefused("backslashes are not allowed in URLs; use '/'")
    return text


def _ipv6_host(host: str) -> tuple[str, ipaddress.IPv6Address]:
    try:
        address = ipaddress.IPv6Address(host)
    except ValueError:
        raise URLRefused("the URL's bracketed host is not an IPv6 address") from None
    return str(address), address


def _named_host(host: str) -> tuple[str, ipaddress.IPv4Address | None]:
    if not host.isascii():
        host = _ascii_host(host)
    if len(host) > MAX_HOST_CHARS:
        raise URLRefused(f"the URL's host is longer than {MAX_HOST_CHARS} characters")
    address = ipv4_of(host)
    if address is not None:
        return str(address), address
    for label in host.split("."):
        if not 1 <= len(label) <= 63:
            raise URLRefused("the URL's host has an empty label or one over 63 characters")
        if not set(label) <= _LABEL_CHARS:
            raise URLRefused("the URL's host may hold only letters, digits, '-', '_' and '.'")
        if label.startswith("xn--"):
            _check_a_label(label)
    return host, None


def _check_a_label(label: str) -> None:
    """An ``xn--`` label must be valid Punycode of a valid IDNA name (the connection would
    otherwise fail on it with an error of the ``idna`` package)."""
    import idna  # lazy: idna; only a URL with a non-ASCII host needs it

    try:
        idna.decode(label)
    except (idna.IDNAError, UnicodeError, ValueError):
        raise URLRefused(
            f"the URL's host has an invalid international label {label!r} (bad Punycode)"
        ) from None


def _ascii_host(host: str) -> str:
    import idna  # lazy: idna; only a URL with a non-ASCII host needs it

    try:
        return str(idna.encode(host, uts46=True).decode("ascii")).lower()
    except (idna.IDNAError, UnicodeError, ValueError):
        raise URLRefused("the URL's host is not a valid international domain name") from None


def ipv4_of(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a host spelled with numbers stands for (decimal, octal with a
    leading ``0``, hex with ``0x``; one to four parts, as URL parsers and ``inet_aton`` read
    it); None for a host name. URLRefused when the host ends in a number but is no address."""
    parts = host.split(".")
    if not _number_like(parts[-1]):
        return None
    if len(parts) > 4:
        raise URLRefused("the URL's host is not a valid IPv4 address (more than 4 parts)")
    if any(len(p) > _MAX_IPV4_PART for p in parts):
        raise URLRefused("the URL's host is not a valid IPv4 address (a part is too long)")
    numbers = [_ipv4_part(p) for p in parts]
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise URLRefused("the URL's host is not a valid IPv4 address (a part is out of range)")
    value = last + sum(n << (8 * (3 - i)) for i, n in enumerate(head))
    return ipaddress.IPv4Address(value)


def _number_like(part: str) -> bool:
    if part.isdigit() and part.isascii():
        return True
    try:
        _ipv4_part(part)
    except URLRefused:
        return False
    return True


def _ipv4_part(part: str) -> int:
    digits, base = part, 10
    if part[:2] in ("0x", "0X"):
        digits, base = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        digits, base = part[1:], 8
    allowed = "0123456789abcdef"[:base]
    if not part or any(ch not in allowed for ch in digits.lower()):
        raise URLRefused("the URL's host is not a valid IPv4 address")
    return int(digits, base) if digits else 0


def _rebuild(
    parts: SplitResult,
    scheme: str,
    host: str,
    port: int | None,
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
) -> ParsedURL:
    import httpx  # lazy: httpx, ~3x python -c pass; only a fetch needs it

    shown = f"[{host}]" if isinstance(address, ipaddress.IPv6Address) else host
    netloc = shown if port is None else f"{shown}:{port}"
    text = f"{scheme}://{netloc}{_clean_path(parts.path)}"
    if parts.query:
        text += f"?{_unescape_unreserved(parts.query)}"
    try:
        canonical = str(httpx.URL(text))
    except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
        raise URLRefused(f"the URL is malformed ({_first_line(exc)})") from None
    return ParsedURL(canonical, host, port or _DEFAULT_PORTS[scheme], address)


def _unescape_unreserved(text: str) -> str:
    """``text`` with escaped unreserved characters decoded and other escapes in upper case;
    URLRefused on a ``%`` that starts no escape (``%u0068`` is ``h`` to some servers)."""
    if _STRAY_PERCENT.search(text):
        raise URLRefused("the URL has a '%' not followed by two hex digits; write '%' as %25")
    return _ESCAPE.sub(_unescape_one, text)


def _unescape_one(match: re.Match[str]) -> str:
    char = chr(int(match[1], 16))
    return char if char in _UNRESERVED else match[0].upper()


def _clean_path(path: str) -> str:
    """``path`` normalised: escapes as in :func:`_unescape_unreserved`, empty segments
    dropped (``//`` merged) and dot segments removed (RFC 3986 5.2.4), after decoding."""
    path = _unescape_unreserved(path)
    if "%2F" in path or "%5C" in path:
        raise URLRefused("escaped '/' or '\\' (%2F, %5C) are not allowed in a URL's path")
    if ";" in path or "%3B" in path:
        raise URLRefused("';' (path parameters) is not allowed in a URL's path")
    segments = path.split("/")
    kept: list[str] = []
    for segment in segments:
        if segment == "..":
            kept = kept[:-1]
        elif segment not in ("", "."):
            kept.append(segment)
    trailing = "/" if kept and segments[-1] in ("", ".", "..") else ""
    return "/" + "/".join(kept) + trailing


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__
