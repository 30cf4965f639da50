"""Existing pydantic-ai tools registered as apcore modules, then governed by apcore.

Run with: .venv/bin/python examples/apcore_scanner/main.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from apcore import ACL, Executor, Identity, Registry
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ToolCallPart, ToolReturnPart
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults
from pydantic_ai.toolsets.function import FunctionToolset

from toolcards.bridges.apcore import ApcoreToolset, register_toolset

# the scripted model the examples share lives in examples/_shared: put it on the import path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_shared"))
from scripted import scripted_model

HERE = Path(__file__).parent


def build_tools() -> FunctionToolset[None]:
    """The tools an application already had, written for pydantic-ai (closures over `stock`)."""
    stock = {"lamp": 3, "desk": 0}
    tools: FunctionToolset[None] = FunctionToolset()

    def lookup_item(sku: str) -> dict[str, Any]:
        """Look up how many units of an item are in stock.

        Args:
            sku: Item code, e.g. "lamp".
        """
        return {"sku": sku, "in_stock": stock.get(sku, 0)}

    def reserve_item(sku: str, quantity: int) -> dict[str, Any]:
        """Reserve units of an item."""
        stock[sku] -= quantity
        return {"sku": sku, "reserved": quantity, "left": stock[sku]}

    def purge_stock() -> dict[str, Any]:
        """Remove every item from the catalogue."""
        stock.clear()
        return {"purged": True}

    def restock(sku, quantity: int) -> None:  # type: ignore[no-untyped-def]
        """Add units of an item (its first parameter has no type)."""
        stock[sku] = stock.get(sku, 0) + quantity

    def whoami(ctx: RunContext[None]) -> str:
        """Report the run id."""
        return str(ctx.run_id)

    tools.add_function(lookup_item, takes_ctx=False)
    tools.add_function(reserve_item, takes_ctx=False, requires_approval=True)
    tools.add_function(purge_stock, takes_ctx=False)
    tools.add_function(restock, takes_ctx=False)
    tools.add_function(whoami, takes_ctx=True)
    return tools


MODEL = scripted_model(
    [
        ToolCallPart("shop_lookup_item", {"sku": "lamp"}, "look"),
        ToolCallPart("shop_purge_stock", {}, "purge"),
        ToolCallPart("shop_reserve_item", {"sku": "lamp", "quantity": 1}, "reserve"),
    ],
    "Outcomes: ",
)
"""Looks up, tries to purge, tries to reserve; then reports."""


def returns(run: Any) -> list[ToolReturnPart]:
    """Tool results in a run's message history."""
    return [
        part
        for message in run.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def main() -> None:
    registry = Registry()
    tools = build_tools()

    print("== registering the agent's tools as apcore modules")
    try:
        register_toolset(tools, registry, prefix="shop.")
    except ValueError as error:
        print(f"  refused: {error}")
    print(f"  modules in the registry: {registry.list()}")

    print("== dropping the untyped tool and registering again")
    tools.tools.pop("restock")
    result = register_toolset(tools, registry, prefix="shop.")
    print(f"  registered: {result.registered}")
    for skipped in result.skipped:
        print(f"  skipped {skipped.name}: {skipped.reason}")
    for scanned in result.modules:
        for warning in scanned.warnings:
            print(f"  warning: {warning}")

    print("== the agent uses them through apcore (ACL from acl.yaml)")
    executor = Executor(registry, acl=ACL.load(str(HERE / "acl.yaml")))
    toolset: ApcoreToolset[None] = ApcoreToolset(
        registry, executor, identity=Identity(id="agent.shopper", type="agent")
    )
    agent = Agent(MODEL, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    run = agent.run_sync("Get me a lamp")
    for part in returns(run):
        print(f"  {part.tool_call_id}: {part.outcome}: {part.content}")
    if isinstance(run.output, DeferredToolRequests):
        print(f"  waiting for approval: {[c.tool_name for c in run.output.approvals]}")
        approvals = {call.tool_call_id: True for call in run.output.approvals}
        resumed = agent.run_sync(
            message_history=run.all_messages(),
            deferred_tool_results=DeferredToolResults(approvals=approvals),
        )
        print(f"  approved and resumed: {returns(resumed)[-1].content}")
        print(f"  model: {resumed.output}")


if __name__ == "__main__":
    main()
