"""Other spellings of a text in which a secret may hide from the value patterns.

One decoding step undoes JSON string escapes (``{\\"password\\": ...}`` inside a string,
``\\u0070``), percent-encoding (``password%3D...``, UTF-8 included), compatibility forms of
Unicode (NFKC: fullwidth ``ｐａｓｓｗｏｒｄ＝``, mathematical letters) and drops invisible
format characters (zero-width spaces, soft hyphens, bidi controls). :func:`views` yields the
text after one, two and three steps (``%253D`` is two), stopping once nothing changes. Each
step is linear in the text.
"""

from __future__ import annotations

import re
import unicodedata
import urllib.parse
from collections.abc import Iterator

DEPTH = 3
_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{4}|[\"\\/bfnrt'])")
_SIMPLE = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n"}
_SIMPLE |= {"r": "\r", "t": "\t"}
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u180e\u3164\ufeff\uffa0"
    "\u200b-\u200f\u202a-\u202e\u2060-\u206f]"
)
# an escape worth undoing: a quote, a backslash or a \u (a bare \n alone changes nothing a
# pattern reads: the YAML pattern knows the escaped line break too)
_WORTH = ('\\"', "\\'", "\\\\", "\\u")


def _unescape(match: re.Match[str]) -> str:
    escape = match.group(0)
    if escape[1] != "u":
        return _SIMPLE[escape[1]]
    code = int(escape[2:], 16)
    return "\ufffd" if 0xD800 <= code <= 0xDFFF else chr(code)


def decoded(text: str) -> str:
    """``text`` after one decoding step (the same text when there is nothing to decode)."""
    if "\\" in text and any(w in text for w in _WORTH):
        text = _ESCAPE.sub(_unescape, text)
    if "%" in text and _PERCENT.search(text) is not None:
        text = urllib.parse.unquote(text, errors="replace")
    if not text.isascii():
        text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))
    return text


def views(text: str) -> Iterator[str]:
    """The spellings of ``text`` one, two and three decoding steps down (fewer when a step
    changes nothing)."""
    for _ in range(DEPTH):
        deeper = decoded(text)
        if deeper == text:
            return
        yield deeper
        text = deeper
