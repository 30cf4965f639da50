"""What an MCP server sends, kept within bounds while it is read.

:class:`JsonTrimmer` takes a server's JSON messages as they arrive (pieces of text, one message
per line on stdio, one per body or event over HTTP) and hands on each message's text keeping at
most :class:`WireBounds` of it: a string longer than ``text`` characters is cut, with the marker
``[... truncated: N more chars]``; the base64 of an image, an audio clip or a file (``data`` /
``blob``) longer than ``binary`` characters becomes a short text saying what was left out; a
message still longer than ``total`` characters, or holding more than ``values`` values, is
replaced by an error answer to its request, as is one with a ``data`` / ``blob`` string past
its bound (parsed, to put the note in its place) that the JSON parser cannot read (nested too
deeply) or that fails otherwise to be rewritten. Until the note takes its place, a file left out
is marked by a text holding a random token of the trimmer's: a server's text that looks like
that mark is text like any other. What is not kept is read and dropped at once: a 30 MB text
result costs the reader the 100,000 characters it keeps, not 30 MB. Short strings and everything
between them are copied by one regular expression (C speed); only long strings are looked at in
Python.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any

from toolcards.core import outside_json

__all__ = ["MAX_VALUES", "JsonTrimmer", "WireBounds", "truncated"]

_MARK = re.compile(r"\n\[\.\.\. truncated: ([0-9]{1,18}) more chars\]\Z")
"""The marker :func:`truncated` leaves (a count of up to 18 digits: one longer is text)."""
_BODY = re.compile(r'(?:[^"\\\n]+|\\[^u\n]|\\u[0-9a-fA-F]{4})*+')
"""Whole characters of a string's source (an escape is one) up to its closing quote, a line
break, or an escape that is cut or broken."""
_OPEN = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?\Z")
"""An escape cut by the end of a piece."""
_UNICODE = re.compile(r"\\u[0-9a-fA-F]{4}")
_HIGH = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
_BINARY_KEY = re.compile(r'"(data|blob)"\s*:\s*\Z')
_MEDIA = {"image": "an image", "audio": "an audio clip"}
_ID = r'(-?\d{1,20}|"[^"\\]{0,256}")'
_HEAD_ID = re.compile(r'\s*\{(?:\s*"jsonrpc"\s*:\s*"2\.0"\s*,)?\s*"id"\s*:\s*' + _ID)
_TAIL_ID = re.compile(r'"id"\s*:\s*' + _ID + r'\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*\Z')
_EDGE = 512
"""Characters of a message's start and end kept to name its request when it is too long."""
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"')
"""A whole string, as the copy takes them (no line break in it)."""
MAX_VALUES = 100_000
"""Values one message may hold (counted at each comma and opening bracket outside strings):
each one costs the client far more than its characters once parsed (400,000 one-letter text
blocks, 10.8 M characters, took 21 s of CPU and 1.2 GiB to validate and list), while the
largest ordinary answers (500 tool definitions, a table of thousands of rows) hold tens of
thousands."""
_PIECES = 256
"""Pieces of a message kept apart before they are joined into one string: a string object
costs some 50 bytes, and an event's data can come one ``data:`` line of a few spaces at a time
(kept apart, 15.8 M characters of them held 385 MB)."""


def truncated(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with the marker ``[... truncated: N more chars]``
    (a marker already at its end counts: N is what is gone in all)."""
    found = _MARK.search(text)
    head, gone = (text[: found.start()], int(found[1])) if found else (text, 0)
    if len(head) <= limit and not gone:
        return text
    if len(head) <= limit:
        return head + _marker(gone)
    return head[:limit] + _marker(len(head) - limit + gone)


def _marker(count: int) -> str:
    return f"\n[... truncated: {count} more chars]"


@dataclass(frozen=True)
class WireBounds:
    """How much of one message from a server is kept (characters of JSON text)."""

    text: int = 100_000
    """Of one string (a text result, a description)."""
    file_bytes: int = 5 << 20
    """Of one file (an image, an audio clip, a blob), decoded."""
    total: int = 15_829_592
    """Of one message in all, strings cut; a longer message is refused."""
    values: int = MAX_VALUES
    """Of one message, counted as :data:`MAX_VALUES` says; a message holding more is refused."""

    @classmethod
    def of(cls, text: int, file_bytes: int) -> WireBounds:
        """Bounds keeping strings of ``text`` characters and files of ``file_bytes``."""
        total = 8 * text + 2 * (4 * -(-file_bytes // 3)) + (1 << 20)
        return cls(text=text, file_bytes=file_bytes, total=total)

    @property
    def binary(self) -> int:
        """Characters of the base64 of one file."""
        return 4 * -(-self.file_bytes // 3)


def _chars(source: str) -> int:
    """The characters the JSON string source ``source`` stands for (an escape as one, an
    escaped surrogate pair as one)."""
    escapes = source.count("\\") - source.count("\\\\")
    pairs = len(_HIGH.findall(source))
    return len(source) - escapes - 4 * len(_UNICODE.findall(source)) - pairs


def _values(source: str) -> int:
    """The values JSON text ``source`` (whole strings only) holds, as :data:`MAX_VALUES`
    counts them, with those of a string that is itself JSON text (see :func:`_nested`): every
    comma and opening bracket but those inside other strings, in one pass over the strings."""
    inside = sum(_counted(s) - _nested(s) for s in _STRING.findall(source))
    return _counted(source) - inside


def _nested(source: str) -> int:
    """The values of the string whose JSON source is ``source`` if its text is JSON text (starts
    with ``[`` or ``{``: pydantic-ai parses such a text block into values, before any cut), else
    0. Decided and counted on the decoded text, as pydantic-ai reads it: ``\\u005b`` is a ``[``
    and ``\\u002c`` a comma. Only a string whose source starts with ``[``, ``{`` or an escape
    can be JSON text, and only one holding an escape is decoded."""
    if source[1:2] not in ("[", "{", "\\"):
        return 0
    if "\\" in source:
        with contextlib.suppress(ValueError):  # a bad escape: the parser will refuse it all
            return _json_values(json.loads(source))
    return _json_values(source[1:])


def _json_values(text: str) -> int:
    """The values of string ``text`` if it is JSON text, else 0 (see :func:`_nested`)."""
    return _counted(text) if text[:1] in ("[", "{") else 0


def _counted(text: str) -> int:
    return text.count(",") + text.count("[") + text.count("{")


def _half_pair(value: str) -> bool:
    return "\ud800" <= value[-1] <= "\udbff"


class _Long:
    """A string too long to copy whole: what of it is kept, and how much was seen."""

    __slots__ = ("binary", "count", "kept", "limit", "seen")

    def __init__(self, limit: int, binary: bool) -> None:
        self.limit = limit
        self.binary = binary
        self.kept: list[str] = []
        self.count = 0
        """Characters ``kept`` stands for."""
        self.seen = 0
        """Characters seen beyond them."""

    def add(self, source: str) -> None:
        """``source``: whole characters of the string (no escape cut in half)."""
        if self.count <= self.limit and not self.seen:
            take = source[: 6 * (self.limit + 1 - self.count)]  # an escape is 6 at most
            whole = _BODY.match(take)
            assert whole is not None
            take, source = take[: whole.end()], source[whole.end() :]
            self.kept.append(take)
            self.count += _chars(take)
        self.seen += _chars(source)  # once some is not kept, nothing after it is

    def text(self) -> tuple[str, int]:
        """The kept characters (at most ``limit``) and how many more there were."""
        value: str = json.loads('"' + "".join(self.kept) + '"')
        extra = self.seen
        if self.seen and value and _half_pair(value):  # its other half is counted in seen
            value = value[:-1]
        if len(value) > self.limit:
            value, extra = value[: self.limit], extra + len(value) - self.limit
        if value and _half_pair(value):  # not to be sent alone
            value, extra = value[:-1], extra + 1
        return value, extra


class JsonTrimmer:
    """Bounds a server's messages while they are read; see the module doc. ``lines``: messages
    end at a line break (stdio); otherwise :meth:`end` ends the one message (an HTTP body, an
    event). :meth:`feed` returns the messages completed so far, each its JSON text (bounded)
    or a ``ValueError`` naming the bound it broke."""

    def __init__(self, bounds: WireBounds, *, lines: bool = True) -> None:
        self.bounds = bounds
        self.lines = lines
        # possessive: nothing to give back, so no memory kept to give it back
        short = f'"(?:[^"\\\\\\n]|\\\\.){{0,{bounds.text}}}+"'
        between = '[^"\\n]+' if lines else '[^"]+'
        self._copy = re.compile(f"(?:{between}|{short})*+")
        self._omitted = f"\x00toolcards-omitted-{secrets.token_hex(16)}:"
        """Where a file left out was, with its size after it: a server cannot spell it."""
        self._reset()

    def _reset(self) -> None:
        self._out: list[str] = []
        self._joined = 0
        """Strings at the start of ``_out`` that each join many pieces."""
        self._head = ""
        self._size = 0
        self._values = 0
        self._pending = ""
        self._long: _Long | None = None
        self._over = False
        self._tail = ""
        self._rewrite = False

    def feed(self, text: str) -> list[str | ValueError]:
        done: list[str | ValueError] = []
        text, self._pending = self._pending + text, ""
        i, n = 0, len(text)
        while i < n:
            if self._over:
                i = self._skip(text, i, done)
            elif self._long is not None:
                i = self._read_long(text, i)
            else:
                i = self._read(text, i, done)
        return done

    def end(self) -> list[str | ValueError]:
        """The last message, ended by the end of the text (an HTTP body, an event's data)."""
        done = self.feed("")
        if self._pending:
            self._emit(self._pending)  # a string never closed: the parser will say so
            self._pending = ""
        if self._long is not None:
            self._close_long()
        if self._out or self._over:
            done.append(self._finish())
        self._reset()
        return done

    # -- reading ------------------------------------------------------------------------------

    def _read(self, text: str, i: int, done: list[str | ValueError]) -> int:
        found = self._copy.match(text, i)
        assert found is not None
        if found.end() > i:
            copied = found.group()
            self._emit(copied, _values(copied))
            i = found.end()
        if i >= len(text) or self._over:
            return i
        if text[i] == "\n":  # lines mode: the message ends here
            if self._out:
                done.append(self._finish())
            self._reset()
            return i + 1
        # a string the copy could not take whole: longer than the bound, cut by the piece's
        # end, or broken (a line break or a bad escape in it)
        body = _BODY.match(text, i + 1)
        assert body is not None
        end, n = body.end(), len(text)
        cut = end == n or _OPEN.match(text, end) is not None
        if not cut and text[end] != '"':  # not JSON: copied as it is, the parser will say so
            self._emit(text[i : end + 1] if text[end] != "\n" else text[i:end])
            return end + 1 if text[end] != "\n" else end
        if not cut or end - i > self.bounds.text + 6:
            key = _BINARY_KEY.search(self._last)
            limit = self.bounds.binary if key else self.bounds.text
            self._long = _Long(limit, binary=key is not None)
            return i + 1
        self._pending = text[i:]  # the rest of this string comes with the next piece
        return n

    def _read_long(self, text: str, i: int) -> int:
        long = self._long
        assert long is not None
        body = _BODY.match(text, i)
        assert body is not None
        end = body.end()
        long.add(body.group())
        if end >= len(text):
            return end
        if text[end] == '"':
            self._close_long()
            return end + 1
        if _OPEN.match(text, end) is not None:  # an escape cut by the piece's end
            self._pending = text[end:]
            return len(text)
        self._close_long()  # broken: what follows is copied, and the parser will say so
        return end

    def _close_long(self) -> None:
        long = self._long
        assert long is not None
        self._long = None
        value, extra = long.text()
        if long.binary and extra:
            self._rewrite = True
            self._emit(json.dumps(f"{self._omitted}{len(value) + extra}"))
            return
        if long.binary and len(value) > self.bounds.text:
            self._rewrite = True  # a long "data" text that is no file's is cut later
        if extra:
            value += _marker(extra)
        self._emit(json.dumps(value), _json_values(value))

    @property
    def _last(self) -> str:
        """The end of the text kept so far (what precedes a string: its key)."""
        return "".join(self._out[-4:])[-64:]

    def _emit(self, piece: str, values: int = 0) -> None:
        """Keep ``piece`` of the message (holding ``values`` values), unless it is too long."""
        self._size += len(piece)
        self._values += values
        if len(self._head) < _EDGE:
            self._head = (self._head + piece)[:_EDGE]
        if self._over or self._size > self.bounds.total or self._values > self.bounds.values:
            self._over = True
            self._out, self._joined = [], 0
            self._tail = (self._tail + piece[-_EDGE:])[-_EDGE:]
            return
        self._out.append(piece)
        if len(self._out) - self._joined > _PIECES:
            self._out[self._joined :] = ["".join(self._out[self._joined :])]
            self._joined += 1

    def _skip(self, text: str, i: int, done: list[str | ValueError]) -> int:
        """Past the bound: read to the message's end, keeping only its last characters."""
        stop = text.find("\n", i) if self.lines else -1
        end = len(text) if stop < 0 else stop
        self._tail = (self._tail + text[max(i, end - _EDGE) : end])[-_EDGE:]
        if stop < 0:
            return len(text)
        done.append(self._finish())
        self._reset()
        return stop + 1

    # -- the message ----------------------------------------------------------------------------

    def _finish(self) -> str | ValueError:
        if self._over:
            why = f"is longer than {self.bounds.total:,} characters"
            if self._values > self.bounds.values:
                why = f"holds more than {self.bounds.values:,} values"
            return self._refused(why)
        text = "".join(self._out)
        if not self._rewrite:
            return text
        try:
            value = outside_json.loads(text)
            self._plain(value)
            return json.dumps(value)
        except Exception as exc:  # nested too deeply included: an answer to its request
            self._tail = text[-_EDGE:]
            why = exc.msg.lower() if isinstance(exc, json.JSONDecodeError) else "unreadable"
            return self._refused(f"is not JSON the client reads ({why})")

    def _refused(self, why: str) -> str | ValueError:
        """An error answer saying the message ``why`` (too long, of too many values, unreadable)
        to the request it answered (named at its start or its end), else an error."""
        found = _HEAD_ID.match(self._head) or _TAIL_ID.search(self._tail)
        message = f"the server's answer {why}"
        if found is None:
            return ValueError(f"{message} (not read)")
        error = {"code": -32603, "message": f"{message}; it was not read"}
        return json.dumps({"jsonrpc": "2.0", "id": json.loads(found[1]), "error": error})

    def _plain(self, value: Any) -> None:
        """Turns each file left out in ``value`` (parsed, changed in place) into a text saying
        so, and cuts each long ``data`` text that is no file's like any other. A loop, not a
        recursion: how deep ``value`` is nested is the server's choice."""
        todo = [value]
        while todo:
            item = todo.pop()
            if isinstance(item, list):
                todo += item
            elif isinstance(item, dict):
                self._plain_object(item)
                todo += item.values()

    def _plain_object(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        media = _MEDIA.get(kind) if isinstance(kind, str) else None
        for key in ("data", "blob"):
            found = item.get(key)
            if not isinstance(found, str):
                continue
            is_file = key == "blob" or media is not None
            size = int(found[len(self._omitted) :]) if found.startswith(self._omitted) else None
            if size is not None and is_file:
                note = self._note(item, media or "a file", size)
                item.clear()
                item.update(note)
                return
            if size is not None:
                item[key] = _marker(size)[1:]
            elif not is_file and len(found) > self.bounds.text:
                item[key] = truncated(found, self.bounds.text)

    def _note(self, item: dict[str, Any], what: str, size: int) -> dict[str, Any]:
        mime = item.get("mimeType")
        if not isinstance(mime, str) or not mime:  # str() of a list recurses on its nesting
            mime = "unknown type"
        text = (
            f"[{what} ({mime}, about {size * 3 // 4:,} bytes) was left out: over the "
            f"{self.bounds.file_bytes:,}-byte limit]"
        )
        if "type" in item:  # a content item: a text item in its place
            return {"type": "text", "text": text}
        return {"uri": item.get("uri", ""), "mimeType": "text/plain", "text": text}
