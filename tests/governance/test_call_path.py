"""How many of the package's files one governed call enters at run time, from
``GovernedToolset.call_tool`` to the insert of its audit row (the caller's thread and the
audit writer's), traced with ``sys.setprofile``. A reader follows the same path through the
code; the fewer rooms it crosses, the easier it is to follow."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

import toolcards
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy

PACKAGE = Path(toolcards.__file__).resolve().parent
MAX_FILES = 12
DETAIL = False


def entered_files(tmp_path: Path) -> list[str]:
    """The package files entered by one warm governed call, in the order first entered."""
    seen: dict[str, None] = {}
    tracing = threading.Event()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and tracing.is_set():
            name = frame.f_code.co_filename
            if name.startswith(str(PACKAGE)):
                seen.setdefault(
                    str(Path(name).relative_to(PACKAGE))
                    + (f":{frame.f_code.co_name}" if DETAIL else ""),
                    None,
                )

    threading.setprofile(profile)  # the audit writer starts with the log: it is traced too
    try:
        audit = AuditLog(tmp_path / "audit.db")
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]

    def write_note(text: str) -> str:
        return text.upper()

    policy = Policy.from_dict({"default_effect": "allow"})
    tools = FunctionToolset([write_note])
    governed = GovernedToolset(tools, policy=policy, identity=Identity("agent.a"), audit=audit)
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage(), tool_call_id="call-1")

    async def calls() -> None:
        listed = await governed.get_tools(ctx)  # the model's step lists once, then calls
        tool = listed["write_note"]
        await governed.call_tool("write_note", {"text": "n0"}, ctx, tool)  # warm: imports
        audit.flush()
        tracing.set()
        sys.setprofile(profile)
        try:
            await governed.call_tool("write_note", {"text": "n1"}, ctx, tool)
            audit.flush()
        finally:
            sys.setprofile(None)
            tracing.clear()

    asyncio.run(calls())
    rows = audit.query(tool="write_note")
    audit.close()
    assert [row.args for row in rows] == [{"text": "n0"}, {"text": "n1"}]
    return list(seen)


def test_one_governed_call_enters_at_most_twelve_files(tmp_path: Path) -> None:
    files = entered_files(tmp_path)
    assert "governance/audit/log.py" in files  # the walk reached the audit row
    assert len(files) <= MAX_FILES, "\n".join(files)


if __name__ == "__main__":  # python tests/governance/test_call_path.py: print the path
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        found = entered_files(Path(tmp))
    print(f"{len(found)} files:", *found, sep="\n  ")
