"""What a pending approval shows, and to whom.

An approver (a principal holding the broker's approver role) sees the exact arguments that
run: the canonical JSON whose SHA-256 is the digest the grant binds to, never redacted, never
cut. Characters that do not show what they are (controls, bidi overrides and isolates,
zero-width and other format characters, unusual spaces, unassigned and private-use code
points) are written as JSON escapes (``\\u202e``) and marked, so the text shown is still JSON
that decodes to exactly the arguments that run. Anyone else sees the redacted copy the audit
trail keeps.

A surface that cannot show an approver the whole text (longer than :data:`INLINE_LIMIT`
characters) offers no way to grant it there: only a place that shows it in full, and deny.
Escaping costs a loop in Python per hidden character: a text is escaped only when shown, and
only as far as it is shown (:data:`PAGE_LIMIT`), one piece per run of hidden characters.
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property, lru_cache

from toolcards.core.approvals import ApprovalRequest
from toolcards.core.identity import Identity
from toolcards.governance.redaction.redactor import canonical_json
from toolcards.stores.approvals import Listed

__all__ = [
    "INLINE_LIMIT",
    "PAGE_LIMIT",
    "ArgumentsView",
    "Piece",
    "arguments_view",
    "escape_hidden",
    "escape_text",
    "is_approver",
    "listed_view",
    "reads_as_itself",
]

INLINE_LIMIT = 16_000
"""Characters of arguments a list or inbox shows in place; longer ones are shown only by a
view of the one request (``toolcards approvals show``, the dashboard's full page)."""

PAGE_LIMIT = 200_000
"""Characters of arguments the dashboard's page of one request shows: longer ones are shown
cut there and cannot be granted there (``toolcards approvals show`` prints them whole), so
that opening a page costs at most this much escaping, whatever a caller sent."""

_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_INVISIBLE = frozenset(
    [
        *(0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x2800, 0x3164, 0xFFA0),  # blank or joiner
        *range(0x180B, 0x1810),  # Mongolian variation selectors and vowel separator
        *range(0xFE00, 0xFE10),  # variation selectors
        *range(0xE0100, 0xE01F0),  # variation selectors supplement
    ]
)
_INVISIBLE_CHARS = frozenset(map(chr, _INVISIBLE))
_SHORT_ESCAPES = {"b": 0x08, "f": 0x0C, "r": 0x0D}
_CONTROL_NAMES = {
    0x00: "NULL", 0x08: "BACKSPACE", 0x0C: "FORM FEED", 0x0D: "CARRIAGE RETURN",
    0x1B: "ESCAPE", 0x7F: "DELETE", 0x85: "NEXT LINE", 0x9B: "CONTROL SEQUENCE INTRODUCER",
}  # fmt: skip
# a JSON escape (``\\uXXXX`` or ``\\x``), or a run of characters outside printable ASCII
_TOKEN = re.compile(r"\\(?:u([0-9a-fA-F]{4})|(.))|([^\x20-\x7e]+)", re.DOTALL)
_LONGEST_TOKEN = len("\\u0000")


@dataclass(frozen=True, slots=True)
class Piece:
    """A run of the text shown; ``escaped`` names the characters when the piece is the escapes
    of a run of adjacent hidden ones (``U+202E RIGHT-TO-LEFT OVERRIDE``; several names joined
    by ``, ``, each once): one piece a run, not one a character."""

    text: str
    escaped: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the characters escaped (a character's name holds no comma)."""
        return tuple(self.escaped.split(", ")) if self.escaped else ()


@dataclass(frozen=True)
class ArgumentsView:
    """The arguments of one request as one viewer may see them, escaped when first read: a
    list that asks only whether they fit never escapes a text too long to show."""

    exact: bool
    """True: the exact arguments (an approver's view); False: the redacted copy."""
    recorded: bool
    """False when the exact arguments were not recorded (nobody can see them: deny only)."""
    digest: str
    source: str
    """The JSON, before its hidden characters are escaped ("" when not recorded)."""
    limit: int | None = None
    """Characters shown at most: the text is cut after them (None: never cut)."""
    unread: int = 0
    """Characters of the JSON left unread (``source`` is then empty): a listing reads no
    more of a request than an inbox shows. Such a view never fits and is never whole, so
    nothing is granted beside it; the view of the one request reads it, and its digest."""

    @cached_property
    def _escaped(self) -> tuple[tuple[Piece, ...], int]:
        return _escape(self.source, self.limit)

    @property
    def pieces(self) -> tuple[Piece, ...]:
        return self._escaped[0]

    @property
    def rest(self) -> int:
        """Characters of the JSON not shown (beyond ``limit``, or unread)."""
        return len(self.source) - self._escaped[1] + self.unread

    @property
    def size(self) -> int:
        """Characters of the JSON, shown or not."""
        return len(self.source) + self.unread

    @property
    def whole(self) -> bool:
        """Whether the text is shown whole, decided from its length alone when it has more
        characters than ``limit`` (each character shows as one or more)."""
        if self.unread or (self.limit is not None and len(self.source) > self.limit):
            return False
        return self.rest == 0

    @property
    def text(self) -> str:
        """The text shown (JSON; escapes are JSON escapes)."""
        return "".join(p.text for p in self.pieces)

    @property
    def escapes(self) -> tuple[str, ...]:
        """The names of the characters shown escaped, each once, in order of appearance."""
        return tuple(dict.fromkeys(name for piece in self.pieces for name in piece.names))

    @property
    def length(self) -> int:
        return sum(len(p.text) for p in self.pieces)

    @property
    def fits(self) -> bool:
        """Short enough to be shown whole in a list or an inbox: decided from the length of the
        JSON alone when it is longer, else by escaping it no further than that."""
        size = len(self.source)
        fitting = not self.unread and size <= INLINE_LIMIT
        return fitting and _escape(self.source, INLINE_LIMIT)[1] == size

    @property
    def grantable(self) -> bool:
        """Whether a grant may be offered beside this view shown whole: exact and recorded."""
        return self.exact and self.recorded


def is_approver(identity: Identity, approver_role: str) -> bool:
    """Whether ``identity`` may decide approvals (and so sees exact arguments)."""
    return not identity.is_anonymous and approver_role in identity.roles


def arguments_view(
    request: ApprovalRequest, *, exact: bool, limit: int | None = None
) -> ArgumentsView:
    """The exact arguments of ``request`` (``exact=True``, for an approver) or its redacted
    copy, with hidden characters escaped and marked; cut after ``limit`` characters shown."""
    if exact:
        recorded = request.exact_recorded
        text = request.args_json if recorded else ""
        return ArgumentsView(True, recorded, request.args_digest, text, limit)
    return ArgumentsView(False, True, request.args_digest, canonical_json(request.args), limit)


def listed_view(item: Listed, *, exact: bool) -> ArgumentsView:
    """The arguments of a request as an inbox lists it (see :class:`Listed`): arguments left
    unread are too long to show there, so nothing is granted beside them."""
    request = item.request
    unread = item.exact_unread if exact else item.redacted_unread
    if unread:
        return ArgumentsView(exact, True, request.args_digest, "", unread=unread)
    return arguments_view(request, exact=exact)


def escape_hidden(text: str, limit: int | None = None) -> tuple[Piece, ...]:
    """``text`` (JSON) cut into pieces, every hidden character written as a marked JSON
    escape (adjacent ones in one piece), at most ``limit`` characters in all (an escape is
    never cut). JSON's own escapes of control characters (other than newline and tab) are
    marked too; ``\\\\`` and ``\\"`` stay plain."""
    return _escape(text, limit)[0]


def _escape(text: str, limit: int | None) -> tuple[tuple[Piece, ...], int]:
    """The pieces of :func:`escape_hidden`, and how many characters of ``text`` they show."""
    room = sys.maxsize if limit is None else limit
    if limit is not None:  # a character shows as one or more: read no further than needed
        text = text[: limit + _LONGEST_TOKEN]
    pieces: list[Piece] = []
    run: list[str] = []  # the escapes of adjacent hidden characters, and their names
    names: dict[str, None] = {}
    shown = 0
    for end, part, name in _segments(text):
        if run and not name:
            pieces.append(Piece("".join(run), ", ".join(names)))
            run, names = [], {}
        if len(part) > room:
            if room and not name:  # plain text is cut between two characters
                pieces.append(Piece(part[:room]))
                shown += room
            break
        if name:
            run.append(part)
            names[name] = None
        else:
            pieces.append(Piece(part))
        room -= len(part)
        shown = end
    if run:
        pieces.append(Piece("".join(run), ", ".join(names)))
    return tuple(pieces) or (Piece(""),), shown


def escape_text(text: str) -> tuple[Piece, ...]:
    """Plain text (a principal, a tool id, a reason) as an approver reads it, on one line:
    written as inside a JSON string (a backslash doubled, a line break ``\\n``; quotes stay
    plain), every hidden character a marked escape, so that no text reads as another."""
    return escape_hidden(_inside_json(text))


def _inside_json(text: str) -> str:
    """``text`` as inside a JSON string (a backslash doubled, a line break ``\\n``), but its
    quotes plain."""
    return json.dumps(text, ensure_ascii=False)[1:-1].replace('\\"', '"')


def escaped_json(text: str) -> str:
    """``text`` (JSON, or text already written as inside a JSON string) as
    :func:`escape_hidden` writes it, as one string: every hidden character a marked escape."""
    return "".join(piece.text for piece in escape_hidden(text))


def escaped_line(text: str) -> str:
    """``text`` as :func:`escape_text` writes it, as one string: stored or caller-written text
    inside a line of a listing, which no line break or hidden character can make read as
    more lines or as other text."""
    return escaped_json(_inside_json(text))


def reads_as_itself(text: str) -> bool:
    """Whether every character of ``text`` shows what it is: no control character (a line
    break or tab included), no bidi, zero-width, invisible or unusual space character."""
    return text.isprintable() and not any(_hidden(ord(char)) for char in text)


def _segments(text: str) -> Iterator[tuple[int, str, str]]:
    """(end in ``text``, text shown, name) of each run of plain text (no name) and each hidden
    character (its escape and name), in order."""
    start = 0
    for at, end, shown, code in _hidden_spans(text):
        if at > start:
            yield at, text[start:at], ""
        yield end, shown, _name(code)
        start = end
    if start < len(text):
        yield len(text), text[start:], ""


def _hidden_spans(text: str) -> Iterator[tuple[int, int, str, int]]:
    """(start, end, escape, code point) of every hidden character of ``text``, in order."""
    for match in _TOKEN.finditer(text):
        hex_code, short, run = match.groups()
        if run is not None:
            if run.isprintable() and _INVISIBLE_CHARS.isdisjoint(run):
                continue  # the usual case, decided without a loop in Python
            for i, char in enumerate(run, match.start()):
                if _hidden(ord(char)):
                    yield i, i + 1, _json_escape(ord(char)), ord(char)
        elif hex_code is not None:
            if _hidden(int(hex_code, 16)):
                yield match.start(), match.end(), match.group(0), int(hex_code, 16)
        elif short in _SHORT_ESCAPES:
            yield match.start(), match.end(), match.group(0), _SHORT_ESCAPES[short]


@lru_cache(maxsize=4096)
def _hidden(code: int) -> bool:
    if code in (0x09, 0x0A):  # tab and newline read as what they are
        return False
    if code in _INVISIBLE:
        return True
    category = unicodedata.category(chr(code))
    return category in _HIDDEN_CATEGORIES or (category == "Zs" and code != 0x20)


@lru_cache(maxsize=4096)
def _json_escape(code: int) -> str:
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


@lru_cache(maxsize=4096)
def _name(code: int) -> str:
    name = unicodedata.name(chr(code), "") or _CONTROL_NAMES.get(code, "")
    if not name:
        category = unicodedata.category(chr(code))
        name = {"Cc": "CONTROL", "Cs": "SURROGATE", "Co": "PRIVATE USE"}.get(category, "UNASSIGNED")
    return f"U+{code:04X} {name}"
