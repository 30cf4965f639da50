"""Serving a registry: apcore-cli, MCP through toolcards' own server, and the error without
the extra."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from bridges._apcore_support import Crm, build_crm
from support.launch import PYTHON
from toolcards.bridges.apcore import build_cli, serve_cli, serve_mcp
from toolcards.core.identity import Identity
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.policy.policy import Policy
from toolcards.surfaces.runtime import SurfaceRuntime

REGISTRY_SCRIPT = """
from typing import Any
from apcore import Registry
from apcore.decorator import module

registry = Registry()

@module(id="math.add", registry=registry)
def add(a: int, b: int) -> dict[str, Any]:
    \"\"\"Add two numbers.

    Args:
        a: First.
        b: Second.
    \"\"\"
    return {"sum": a + b}
"""


def _script(tmp_path: Path, tail: str) -> Path:
    path = tmp_path / "app.py"
    path.write_text(REGISTRY_SCRIPT + textwrap.dedent(tail))
    return path


def test_serve_cli_runs_a_real_command_line(tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        """
        import sys
        from toolcards.bridges.apcore import serve_cli
        serve_cli(registry, argv=sys.argv[1:], prog_name="calc")
        """,
    )
    done = subprocess.run(
        [PYTHON, str(script), "math", "add", "--a", "2", "--b", "40"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert '"sum": 42' in done.stdout


def test_cli_rejects_bad_input_with_a_nonzero_exit() -> None:
    namespace: dict[str, Any] = {}
    exec(REGISTRY_SCRIPT, namespace)
    cli = build_cli(namespace["registry"], prog_name="calc")
    outcome = CliRunner().invoke(cli, ["math", "add", "--a", "two", "--b", "1"])
    assert outcome.exit_code != 0


def test_build_cli_works_with_the_click_runner() -> None:
    namespace: dict[str, Any] = {}
    exec(REGISTRY_SCRIPT, namespace)
    cli = build_cli(namespace["registry"], prog_name="calc")
    outcome = CliRunner().invoke(cli, ["math", "add", "--a", "1", "--b", "2"])
    assert outcome.exit_code == 0, outcome.output
    assert '"sum": 3' in outcome.output


def test_serve_cli_without_standalone_mode_returns() -> None:
    namespace: dict[str, Any] = {}
    exec(REGISTRY_SCRIPT, namespace)
    serve_cli(namespace["registry"], argv=["--help"], prog_name="calc", standalone_mode=False)


def test_serve_mcp_serves_the_registry_over_stdio(tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    script = _script(
        tmp_path,
        """
        from toolcards.bridges.apcore import serve_mcp
        serve_mcp(registry)
        """,
    )
    params = StdioServerParameters(command=PYTHON, args=[str(script)])

    async def session() -> tuple[list[str], str]:
        with anyio.fail_after(60):
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                names = [tool.name for tool in (await client.list_tools()).tools]
                result = await client.call_tool("math.add", {"a": 5, "b": 6})
                text = "".join(getattr(block, "text", "") for block in result.content)
                return names, text

    names, text = anyio.run(session)
    assert "math.add" in names
    assert "11" in text


MALLORY_DENIED = """
import sys
from apcore import ACL, ACLRule, Executor
from toolcards.bridges.apcore import serve_mcp
from toolcards.core.identity import Identity

deny = ACLRule(callers=["agent.mallory"], targets=["math.*"], effect="deny")
executor = Executor(registry, acl=ACL(rules=[deny], default_effect="allow"))
serve_mcp(executor, identity=Identity(sys.argv[1], "agent"))
"""


def _stdio_call(script: Path, *args: str) -> str:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=PYTHON, args=[str(script), *args])

    async def session() -> str:
        with anyio.fail_after(60):
            async with (
                stdio_client(params) as (read, write),
                ClientSession(read, write) as client,
            ):
                await client.initialize()
                result = await client.call_tool("math.add", {"a": 5, "b": 6})
                return "".join(getattr(block, "text", "") for block in result.content)

    return anyio.run(session)


@pytest.mark.parametrize(("who", "runs"), [("agent.ada", True), ("agent.mallory", False)])
def test_serve_mcp_over_stdio_calls_apcore_as_the_served_identity(
    tmp_path: Path, who: str, runs: bool
) -> None:
    script = _script(tmp_path, MALLORY_DENIED)
    text = _stdio_call(script, who)
    assert ('"sum": 11' in text) is runs, text


def _crm_denying(caller: str) -> tuple[Crm, Any]:
    from apcore import ACL, ACLRule, Executor

    crm = build_crm()
    deny = ACLRule(callers=[caller], targets=["crm.*"], effect="deny")
    return crm, Executor(crm.registry, acl=ACL(rules=[deny], default_effect="allow"))


async def _mcp_call(caps: CapabilityRegistry, who: Identity) -> Any:
    from mcp.client.client import Client

    from toolcards.surfaces.mcp_server.server import GovernedMCPServer

    with SurfaceRuntime.build(caps, policy=Policy.allow_all(), identity=who) as rt:
        server = GovernedMCPServer(rt)
        async with server.running(), Client(server.server) as client:
            return await client.call_tool("crm.read", {"customer": "c1"})


def test_serve_mcp_calls_apcore_as_the_caller_toolcards_governed() -> None:
    """An apcore ACL that denies one principal holds over MCP: the bridge hands apcore the
    caller toolcards' executor runs the call for, not a caller-less context."""
    from toolcards.bridges.apcore.serve import module_capabilities

    crm, executor = _crm_denying("agent.mallory")
    caps = module_capabilities(executor)
    denied = anyio.run(_mcp_call, caps, Identity("agent.mallory", "agent"))
    assert denied.is_error
    assert crm.executed == []
    allowed = anyio.run(_mcp_call, caps, Identity("agent.ada", "agent"))
    assert not allowed.is_error
    assert crm.executed == [("crm.read", {"customer": "c1"})]


@pytest.mark.parametrize("answer", [True, False])
def test_a_module_requiring_approval_runs_once_toolcards_approver_says_yes(
    answer: bool, tmp_path: Path
) -> None:
    """toolcards' gate asks a human for a module whose metadata requires approval; the bridge
    then runs it (it raised ApprovalRequired after the yes: the module never ran over MCP)."""
    from apcore import Executor as ApcoreExecutor

    from toolcards.bridges.apcore.serve import module_capabilities
    from toolcards.governance.audit.log import AuditLog
    from toolcards.governance.executor.pipeline import Executor

    crm = build_crm()
    caps = module_capabilities(ApcoreExecutor(crm.registry))
    assert caps["crm.delete"].annotations.requires_approval
    asked: list[str] = []

    async def approver(request: Any) -> bool:
        asked.append(request.tool_id)
        return answer

    audit = AuditLog(tmp_path / "audit.db")
    executor = Executor(caps, Policy.allow_all(), audit=audit)
    who = Identity("agent.a", "agent")
    result = anyio.run(
        lambda: executor.call("crm.delete", {"customer": "c1"}, who, approver=approver)
    )
    assert asked == ["crm.delete"]
    assert result.ok is answer
    assert crm.executed == ([("crm.delete", {"customer": "c1"})] if answer else [])
    outcomes = [row.outcome for row in audit.query() if row.tool == "crm.delete"]
    audit.close()
    assert outcomes[-1] == ("ok" if answer else "denied")


def test_an_anonymous_mcp_caller_stays_apcores_external_caller() -> None:
    from toolcards.bridges.apcore.serve import module_capabilities

    crm, executor = _crm_denying("@external")
    denied = anyio.run(_mcp_call, module_capabilities(executor), Identity.anonymous())
    assert denied.is_error
    assert crm.executed == []


def test_serve_mcp_lists_the_modules_as_governed_capabilities() -> None:
    from toolcards.bridges.apcore.serve import module_capabilities

    namespace: dict[str, Any] = {}
    exec(REGISTRY_SCRIPT, namespace)
    caps = module_capabilities(namespace["registry"])
    assert "math.add" in caps.ids()
    assert caps["math.add"].json_schema["required"] == ["a", "b"]


def test_serve_mcp_refuses_an_unknown_transport() -> None:
    with pytest.raises(ValueError, match="transport"):
        serve_mcp(object(), transport="carrier-pigeon")


def _drop_bridge(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(sys.modules):
        if name.startswith("toolcards.bridges.apcore"):
            monkeypatch.delitem(sys.modules, name)


def test_importing_the_bridge_without_apcore_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _drop_bridge(monkeypatch)
    monkeypatch.setitem(sys.modules, "apcore", None)
    with pytest.raises(ImportError, match=r"toolcards\[apcore\]"):
        importlib.import_module("toolcards.bridges.apcore")


def test_serve_cli_without_apcore_cli_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "apcore_cli", None)
    with pytest.raises(ImportError, match=r"toolcards\[apcore\]"):
        serve_cli(object(), argv=[])


def test_importing_toolcards_does_not_import_apcore() -> None:
    code = "import sys, toolcards; print('apcore' in sys.modules)"
    done = subprocess.run(
        [PYTHON, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False"
