"""Shared helpers for governance tests: a scripted FunctionModel and small toolsets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.toolsets import FunctionToolset

HERE = Path(__file__).parent
POLICY_PATH = HERE / "policy.yaml"
TABLE_PATH = HERE / "policy_table.yaml"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    """A FunctionToolset whose tools record their calls in ``calls``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        ts: FunctionToolset[Any] = FunctionToolset()

        @ts.tool_plain(metadata={"readonly": True})
        def crm_read(id: int) -> str:
            """Read one CRM record."""
            self.calls.append(("crm_read", {"id": id}))
            return f"record {id}"

        @ts.tool_plain(metadata={"destructive": True})
        def crm_delete(id: int) -> str:
            """Delete one CRM record."""
            self.calls.append(("crm_delete", {"id": id}))
            return f"deleted {id}"

        @ts.tool_plain(metadata={"sensitive": ["api_key"]})
        def transfer_money(amount: float, currency: str, to: str, api_key: str = "") -> str:
            """Transfer money."""
            self.calls.append(("transfer_money", {"amount": amount, "to": to}))
            return f"sent {amount:g} {currency} to {to}"

        @ts.tool_plain
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            self.calls.append(("send_email", {"to": to, "body": body}))
            return f"mailed {to}"

        self.toolset = ts

    def count(self, name: str) -> int:
        return sum(1 for n, _ in self.calls if n == name)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
