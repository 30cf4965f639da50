"""What a tool's value becomes on the wire: text every JSON writer sends."""

from __future__ import annotations

import json

import pytest

from toolcards.surfaces.mcp_server.content import tool_content


@pytest.mark.parametrize("value", ["bad\udcff.txt", ["bad\udcff.txt", "ok"], {"name": "bad\udcff"}])
def test_a_name_that_is_not_utf8_is_sent_as_its_escape(value: object) -> None:
    """A file name decoded from bytes that are not UTF-8 holds a lone surrogate, which no
    JSON writer sends: the whole response of a plain `workspace_list` failed to serialise."""
    blocks, structured = tool_content(value)
    wire = "".join(block.model_dump_json() for block in blocks)  # raised before
    wire += json.dumps(structured, ensure_ascii=False)
    assert "\\\\udcff" in wire and "\udcff" not in wire
    wire.encode()  # UTF-8 throughout
