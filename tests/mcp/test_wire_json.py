"""The bounded reader of a server's JSON messages on its own: what it keeps equals the JSON it
was given, in any cutting into pieces, except for what a bound cuts (and says so)."""

from __future__ import annotations

import json
import random
import string
import sys
import tracemalloc
from typing import Any

import pytest

from toolcards.tools.mcp.wire_json import JsonTrimmer, WireBounds, truncated

WIDE = WireBounds(text=10**6, file_bytes=10**6, total=10**8)
ALPHABET = string.ascii_letters + ' "\\\n\t/\u00e9\u4e2d\u2028\U0001f600'


def _value(rnd: random.Random, depth: int = 0) -> Any:
    kind = rnd.randrange(7 if depth < 4 else 4)
    if kind == 0:
        return rnd.choice([True, False, None])
    if kind == 1:
        return rnd.randint(-(10**12), 10**12)
    if kind == 2:
        return rnd.random() * 1e5
    if kind == 3:
        return "".join(rnd.choice(ALPHABET) for _ in range(rnd.randrange(30)))
    if kind == 4:
        return [_value(rnd, depth + 1) for _ in range(rnd.randrange(5))]
    return {str(rnd.randrange(99)): _value(rnd, depth + 1) for _ in range(rnd.randrange(5))}


def _read(trimmer: JsonTrimmer, text: str, rnd: random.Random) -> list[Any]:
    found: list[Any] = []
    i = 0
    while i < len(text):
        step = rnd.randrange(1, 15)
        found += trimmer.feed(text[i : i + step])
        i += step
    if not trimmer.lines:
        found += trimmer.end()
    return found


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return truncated(value, limit)
    if isinstance(value, list):
        return [_cut(v, limit) for v in value]
    if isinstance(value, dict):
        return {k: _cut(v, limit) for k, v in value.items()}
    return value


@pytest.mark.parametrize("limit", [10**6, 12, 3])
def test_messages_in_any_pieces_come_out_as_given_but_for_long_strings(limit: int) -> None:
    rnd = random.Random(limit)
    bounds = WireBounds(text=limit, file_bytes=10**6, total=10**8)
    for _ in range(500):
        messages = [_value(rnd) for _ in range(rnd.randrange(1, 4))]
        text = "".join(json.dumps(m, ensure_ascii=rnd.random() < 0.5) + "\n" for m in messages)
        found = [json.loads(m) for m in _read(JsonTrimmer(bounds), text, rnd)]
        assert found == [_cut(m, limit) for m in messages], text


def test_a_document_spread_over_lines_is_one_message() -> None:
    rnd = random.Random(7)
    for _ in range(200):
        value = _value(rnd)
        found = _read(JsonTrimmer(WIDE, lines=False), json.dumps(value, indent=2), rnd)
        assert [json.loads(m) for m in found] == [value]


def test_a_long_text_keeps_its_head_and_counts_the_rest() -> None:
    trimmer = JsonTrimmer(WireBounds(text=5, file_bytes=1024, total=10**6))
    [kept] = trimmer.feed(json.dumps({"text": "abcdefghij\u00e9\U0001f600"}) + "\n")
    assert json.loads(kept) == {"text": "abcde\n[... truncated: 7 more chars]"}


def test_a_file_over_its_bound_becomes_a_note() -> None:
    trimmer = JsonTrimmer(WireBounds(text=100, file_bytes=30, total=10**6))
    image = {"type": "image", "data": "A" * 400, "mimeType": "image/png"}
    blob = {"type": "resource", "resource": {"uri": "file:///x", "blob": "A" * 400}}
    small = {"type": "image", "data": "A" * 40, "mimeType": "image/png"}
    [kept] = trimmer.feed(json.dumps({"content": [image, blob, small]}) + "\n")
    assert json.loads(kept)["content"] == [
        {"type": "text", "text": "[an image (image/png, about 300 bytes) was left out: "
         "over the 30-byte limit]"},
        {"type": "resource", "resource": {"uri": "file:///x", "mimeType": "text/plain",
         "text": "[a file (unknown type, about 300 bytes) was left out: over the 30-byte limit]"}},
        small,
    ]  # fmt: skip


@pytest.mark.parametrize("first", [True, False], ids=["id-first", "id-last"])
def test_a_message_past_the_total_answers_its_request_with_an_error(first: bool) -> None:
    trimmer = JsonTrimmer(WireBounds(text=100, file_bytes=30, total=1000))
    items = [{"type": "text", "text": f"item {i}"} for i in range(500)]
    body = {"jsonrpc": "2.0", "id": 7, "result": {"content": items}}
    if not first:
        body = {"result": body.pop("result"), "jsonrpc": "2.0", "id": 7}
    [answer] = trimmer.feed(json.dumps(body) + "\n" + json.dumps({"jsonrpc": "2.0", "id": 8})[:-1])
    assert json.loads(str(answer)) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "the server's answer is longer than 1,000 "
                  "characters; it was not read"},
    }  # fmt: skip
    assert trimmer.feed("}\n") == ['{"jsonrpc": "2.0", "id": 8}']  # the next one reads on


@pytest.mark.parametrize("lines", [True, False], ids=["stdio", "http"])
def test_a_message_of_too_many_values_answers_its_request_with_an_error(lines: bool) -> None:
    bounds = WireBounds(text=100, file_bytes=30, total=10**6, values=1000)
    items = [{"type": "text", "text": "a"} for _ in range(400)]  # 1,200 values, 12 K characters
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"content": items}})
    found = _read(JsonTrimmer(bounds, lines=lines), body + "\n", random.Random(3))
    assert json.loads(str(found[0])) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "the server's answer holds more than 1,000 "
                  "values; it was not read"},
    }  # fmt: skip


def test_the_values_of_a_text_that_is_json_count() -> None:
    """pydantic-ai parses a text block starting with `[` or `{` into Python values before any
    cut: 150 blocks of 99,000 characters held 4.95 M values past the 100,000-value bound."""
    bounds = WireBounds(text=10**4, file_bytes=30, total=10**6, values=1000)
    text = "[" + "{}," * 600 + "{}]"
    body = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": text}]}}
    [answer] = JsonTrimmer(bounds).feed(json.dumps(body) + "\n")
    assert "holds more than 1,000 values" in str(answer)
    plain = {**body, "result": {"content": [{"type": "text", "text": "see " + text}]}}
    [kept] = JsonTrimmer(bounds).feed(json.dumps(plain) + "\n")
    assert json.loads(str(kept)) == plain  # a text that is not JSON is one value


def _escaped(text: str, char: str, first: bool) -> str:
    """The JSON source of string ``text`` with ``char`` spelt as a ``\\u`` escape (only its
    first one if ``first``)."""
    escape = f"\\u{ord(char):04x}"
    source = json.dumps(text)
    return source.replace(char, escape, 1) if first else source.replace(char, escape)


@pytest.mark.parametrize(
    ("text", "char", "first"),
    [
        ("[" + "0," * 1200 + "0]", "[", True),
        ("[" + "0," * 1200 + "0]", ",", False),
        ("[" + "0," * 3000 + "0]", ",", False),  # its source is past the text bound, not it
    ],
    ids=["first-bracket", "commas", "commas-long-source"],
)
def test_the_values_of_a_json_text_count_as_decoded(text: str, char: str, first: bool) -> None:
    """pydantic-ai reads the decoded text: `\\u005b0,0,...]` is a list, and so is a list whose
    commas are `\\u002c`; counted on the source, either passed the bound."""
    bounds = WireBounds(text=10**4, file_bytes=30, total=10**6, values=1000)
    head = '{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": '
    wire = head + _escaped(text, char, first) + "}]}}\n"
    [answer] = JsonTrimmer(bounds).feed(wire)
    assert "holds more than 1,000 values" in str(answer)
    plain = head + _escaped("\n" + text, char, first) + "}]}}\n"  # not JSON: one value
    [kept] = JsonTrimmer(bounds).feed(plain)
    assert json.loads(str(kept))["result"]["content"][0]["text"] == "\n" + text


def test_commas_and_brackets_in_strings_are_not_values() -> None:
    bounds = WireBounds(text=10**4, file_bytes=30, total=10**6, values=10)
    body = {"id": 1, "result": {"text": ",[{" * 3000, "more": ['"],[{\\', "x,y"]}}
    [kept] = JsonTrimmer(bounds).feed(json.dumps(body) + "\n")
    assert json.loads(str(kept)) == body


def test_a_message_of_many_small_pieces_is_kept_compactly() -> None:
    """An event's JSON data continued by endless ``data:`` lines of a few spaces: each piece
    was kept as a string of its own, some 20 bytes a character (385 MB within the total)."""
    trimmer = JsonTrimmer(WireBounds(), lines=False)
    size = 1_000_000
    spaces = " " * size
    tracemalloc.start()
    try:
        assert trimmer.feed("{") == []
        for i in range(0, size, 8):
            assert trimmer.feed(spaces[i : i + 8]) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * size, f"{peak / size:.1f} bytes a character kept"
    assert trimmer.feed("}") == []
    assert [json.loads(str(m)) for m in trimmer.end()] == [{}]


@pytest.mark.parametrize("lines", [True, False], ids=["stdio", "http"])
@pytest.mark.parametrize("where", ["structuredContent", "mimeType"])
def test_a_message_nested_past_the_parser_answers_its_request_with_an_error(
    where: str, lines: bool
) -> None:
    """A message with a file left out is parsed to put the note in its place: 50,000 nested
    brackets beside it (or a few hundred, walked once more) raised ``RecursionError`` out of the
    reader, which closed the connection (a stdio server was killed) mid-call."""
    bounds = WireBounds(text=100, file_bytes=30, total=10**6)
    limit = sys.getrecursionlimit()
    kept, refused = [], []
    for depth in [*range(limit - 300, limit + 50, 5), 50_000]:
        nested = "[" * depth + "]" * depth
        image = '{"type": "image", "mimeType": "image/png", "data": "' + "A" * 400 + '"}'
        body = '{"jsonrpc": "2.0", "id": 7, "result": {"content": [IMAGE], "structuredContent": 0}}'
        if where == "mimeType":
            image = image.replace('"image/png"', nested)
        else:
            body = body.replace('"structuredContent": 0', f'"structuredContent": {nested}')
        wire = body.replace("IMAGE", image) + "\n"
        [answer] = _read(JsonTrimmer(bounds, lines=lines), wire, random.Random(depth))
        assert isinstance(answer, str)
        if "was left out" in answer:
            kept.append(depth)
            assert "toolcards-omitted" not in answer
        else:
            refused.append(depth)
            assert json.loads(answer) == {
                "jsonrpc": "2.0",
                "id": 7,
                "error": {"code": -32603, "message": "the server's answer is not JSON the "
                          "client reads (nested too deeply); it was not read"},
            }  # fmt: skip
    assert max(kept) < min(refused) < limit + 50  # the parser's depth is crossed


@pytest.mark.parametrize("lines", [True, False], ids=["stdio", "http"])
def test_a_spelled_mark_beside_a_file_left_out_is_text(lines: bool) -> None:
    """A file left out is marked in the message until its note takes its place: a server that
    spelled that mark (``\\u0000toolcards-omitted:x``) beside an image past its bound raised
    ``ValueError`` out of the reader, which closed the connection mid-call; so did a cut text's
    marker with a count of 5,000 digits."""
    bounds = WireBounds(text=100, file_bytes=4000, total=10**6)
    spelled = ["\x00toolcards-omitted:x", "\x00toolcards-omitted:99999999"]
    long_count = "a\n[... truncated: " + "9" * 5000 + " more chars]"
    content = [
        {"type": "image", "data": "A" * 6000, "mimeType": "image/png"},
        *({"type": "image", "data": mark, "mimeType": "image/png"} for mark in spelled),
        {"type": "resource", "resource": {"uri": "file:///x", "blob": spelled[1]}},
        {"type": "text", "data": spelled[0] * 10},  # a long "data" text that is no file's
        {"type": "text", "data": long_count},
    ]
    body = {"jsonrpc": "2.0", "id": 7, "result": {"content": content}}
    [answer] = _read(JsonTrimmer(bounds, lines=lines), json.dumps(body) + "\n", random.Random(5))
    assert json.loads(str(answer))["result"]["content"] == [
        {"type": "text", "text": "[an image (image/png, about 4,500 bytes) was left out: "
         "over the 4,000-byte limit]"},
        *content[1:4],
        {"type": "text", "data": truncated(spelled[0] * 10, 100)},
        {"type": "text", "data": long_count[:100] + "\n[... truncated: 4930 more chars]"},
    ]  # fmt: skip


def test_a_message_that_fails_to_be_rewritten_answers_its_request_with_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever fails while a message with a file left out is rewritten answers its request; the
    reader reads on."""

    def fail(self: JsonTrimmer, item: dict[str, Any]) -> None:
        raise KeyError("type")

    monkeypatch.setattr(JsonTrimmer, "_plain_object", fail)
    trimmer = JsonTrimmer(WireBounds(text=100, file_bytes=30, total=10**6))
    image = {"type": "image", "data": "A" * 400, "mimeType": "image/png"}
    body = {"jsonrpc": "2.0", "id": 7, "result": {"content": [image]}}
    [answer] = trimmer.feed(json.dumps(body) + "\n")
    assert json.loads(str(answer)) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "the server's answer is not JSON the client reads "
                  "(unreadable); it was not read"},
    }  # fmt: skip
    assert trimmer.feed('{"id": 8}\n') == ['{"id": 8}']
