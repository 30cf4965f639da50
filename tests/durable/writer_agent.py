"""A governed toolcards agent under DBOS, run as its own process by the durable-run tests.

``python writer_agent.py <system db url> <call results url> <dir> <after|during>`` runs
workflow ``notes-1``: the model (a FunctionModel) calls the governed ``append_line`` tool,
which appends a line to ``<dir>/workspace/notes.txt``. Then, ``after``: the model's next
request writes ``<dir>/ready`` and waits for ``<dir>/gate`` before the run ends; ``during``:
the tool itself does, after its line and before it returns. Started again after a SIGKILL,
DBOS recovers the workflow and this process waits for it; the run's output goes to
``<dir>/output``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

from dbos import DBOS, DBOSConfig, SetWorkflowID
from pydantic_ai import Agent
from pydantic_ai.durable_exec.dbos import DBOSDurability
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.stores.postgres.call_results import PostgresCallResults

WORKFLOW_ID = "notes-1"

system_db, results_url, base, pause = sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4]
notes = base / "workspace" / "notes.txt"
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(message)s")
logging.getLogger("toolcards.governance.executor.replay").setLevel(logging.INFO)

DBOS(
    config=DBOSConfig(
        name="toolcards-durable-test",
        system_database_url=system_db,
        application_version="1",  # the restarted process recovers the first one's workflows
    )
)


def append_line(text: str) -> str:
    """Append one line to the notes file (a side effect: running it twice shows)."""
    with notes.open("a", encoding="utf-8") as file:
        file.write(text + "\n")
    if pause == "during":
        (base / "ready").write_text("ready")
        while not (base / "gate").exists():  # the test opens the gate after killing this process
            time.sleep(0.05)
    return f"appended {text!r}"


async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [
        part.content
        for message in messages
        for part in getattr(message, "parts", ())
        if isinstance(part, ToolReturnPart)
    ]
    if not returns:  # no tool call id given: pydantic-ai draws a random one
        return ModelResponse(parts=[ToolCallPart("append_line", {"text": "first note"})])
    if pause == "after":
        (base / "ready").write_text("ready")
        while not (base / "gate").exists():  # the test opens the gate after killing this process
            await asyncio.sleep(0.05)
    return ModelResponse(parts=[TextPart(f"done: {returns[-1]}")])


policy = Policy.from_dict(
    {
        "default_effect": "deny",
        "rules": [{"callers": ["agent.writer"], "targets": ["append_line"], "effect": "allow"}],
    }
)
audit = AuditLog(base / "audit.db", durability="sync")
governed = GovernedToolset.with_policy(
    FunctionToolset([append_line], id="notes"),
    policy=policy,
    identity=Identity("agent.writer", type="agent"),
    audit=audit,
    timeout=None,  # the tool waits for the test in ``during``
    call_results=PostgresCallResults(results_url, "notes"),
)
agent = Agent(
    FunctionModel(model),
    name="durable_writer",
    toolsets=[governed],
    capabilities=[DBOSDurability()],
)


@DBOS.workflow()
async def write_notes(prompt: str) -> str:
    result = await agent.run(prompt)
    return str(result.output)


async def main() -> None:
    DBOS.launch()
    if await DBOS.get_workflow_status_async(WORKFLOW_ID) is not None:
        handle = await DBOS.retrieve_workflow_async(WORKFLOW_ID)  # recovered by launch
        output = await handle.get_result()
    else:
        with SetWorkflowID(WORKFLOW_ID):
            output = await write_notes("Write the first note.")
    (base / "output").write_text(output)
    audit.close()


if __name__ == "__main__":
    asyncio.run(main())
    DBOS.destroy()
