"""Existing pydantic-ai tools registered as apcore modules."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from apcore import Context, Executor, Identity, Registry
from apcore_toolkit import ScannedModule
from pydantic_ai import RunContext
from pydantic_ai.toolsets.function import FunctionToolset

from toolcards.bridges.apcore import RegistrationError, register_toolset


def send_invoice(customer_id: str, amount: float) -> dict[str, Any]:
    """Send an invoice to a customer.

    Args:
        customer_id: Who to bill.
        amount: How much, in USD.
    """
    return {"customer_id": customer_id, "amount": amount, "sent": True}


def undocumented(x: int, y: int) -> int:
    """Add two numbers."""
    return x + y


def with_context(ctx: RunContext[None], note: str) -> str:
    """Needs the run context."""
    return note


def _call(registry: Registry, module_id: str, inputs: dict[str, Any]) -> dict[str, Any]:
    context = Context.create(identity=Identity(id="tester"))
    result: dict[str, Any] = asyncio.run(Executor(registry).call_async(module_id, inputs, context))
    return result


def _toolset(*funcs: Any, **kwargs: Any) -> FunctionToolset[None]:
    toolset: FunctionToolset[None] = FunctionToolset()
    for func in funcs:
        toolset.add_function(func, takes_ctx=False, **kwargs)
    return toolset


def test_plain_tools_become_modules_with_the_prefix() -> None:
    registry = Registry()
    result = register_toolset(_toolset(send_invoice), registry, prefix="billing.")
    assert result.registered == ["billing.send_invoice"]
    assert registry.has("billing.send_invoice")
    assert _call(registry, "billing.send_invoice", {"customer_id": "c9", "amount": 3.5})["sent"]


def test_run_context_tools_are_skipped_with_a_reason() -> None:
    toolset: FunctionToolset[None] = FunctionToolset()
    toolset.add_function(with_context, takes_ctx=True)
    toolset.add_function(send_invoice, takes_ctx=False)
    result = register_toolset(toolset, Registry())
    assert result.registered == ["send_invoice"]
    assert [(s.name, "RunContext" in s.reason) for s in result.skipped] == [("with_context", True)]


def test_undocumented_parameters_are_flagged() -> None:
    result = register_toolset(_toolset(undocumented, send_invoice), Registry())
    warnings = {m.module_id: m.warnings for m in result.modules}
    assert any("x, y" in w for w in warnings["undocumented"])
    assert warnings["send_invoice"] == []


def test_closures_register_and_run() -> None:
    ledger: list[str] = []

    def make_tool() -> Any:
        def record(entry: str) -> dict[str, Any]:
            """Record an entry.

            Args:
                entry: Text to record.
            """
            ledger.append(entry)
            return {"count": len(ledger)}

        return record

    registry = Registry()
    result = register_toolset(_toolset(make_tool()), registry, prefix="ledger.")
    assert _call(registry, "ledger.record", {"entry": "a"}) == {"count": 1}
    assert ledger == ["a"]
    assert any("not importable" in w for w in result.modules[0].warnings)


def test_tools_without_a_return_annotation_still_run() -> None:
    def shout(text: str):  # type: ignore[no-untyped-def]
        """Upper-case a text.

        Args:
            text: The text.
        """
        return text.upper()

    registry = Registry()
    register_toolset(_toolset(shout), registry)
    assert _call(registry, "shout", {"text": "hi"}) == {"result": "HI"}


def test_requires_approval_carries_over() -> None:
    registry = Registry()
    register_toolset(_toolset(send_invoice, requires_approval=True), registry)
    descriptor = registry.get_definition("send_invoice")
    assert descriptor is not None and descriptor.annotations is not None
    assert descriptor.annotations.requires_approval is True


def test_toolcards_annotations_in_tool_metadata_carry_over() -> None:
    registry = Registry()
    register_toolset(_toolset(undocumented, metadata={"readonly": True}), registry)
    annotations = registry.get_definition("undocumented").annotations  # type: ignore[union-attr]
    assert annotations.readonly is True and annotations.requires_approval is False


def test_every_problem_is_reported_and_nothing_is_registered() -> None:
    def untyped(value):  # type: ignore[no-untyped-def]
        """No type hints."""
        return value

    registry = Registry()
    register_toolset(_toolset(undocumented), registry)  # makes 'undocumented' a duplicate
    toolset = _toolset(send_invoice, undocumented, untyped)
    with pytest.raises(RegistrationError) as caught:
        register_toolset(toolset, registry)
    problems = caught.value.problems
    assert len(problems) == 2
    assert any("undocumented" in p and "already registered" in p for p in problems)
    assert any("untyped" in p and "value" in p for p in problems)
    assert not registry.has("send_invoice")


def test_invalid_module_ids_are_reported() -> None:
    with pytest.raises(RegistrationError) as caught:
        register_toolset(_toolset(send_invoice), Registry(), prefix="system.")
    assert "reserved" in caught.value.problems[0]


def test_enhancers_fill_gaps_before_registration() -> None:
    class Describer:
        def enhance(self, modules: list[ScannedModule]) -> list[ScannedModule]:
            return [
                dataclasses.replace(m, description=f"[enhanced] {m.description}") for m in modules
            ]

    registry = Registry()
    result = register_toolset(_toolset(undocumented), registry, enhancers=[Describer()])
    assert result.modules[0].description.startswith("[enhanced]")
    assert registry.get_definition("undocumented").description.startswith("[enhanced]")  # type: ignore[union-attr]


def test_only_toolsets_with_held_callables_are_accepted() -> None:
    with pytest.raises(TypeError):
        register_toolset(object(), Registry())
