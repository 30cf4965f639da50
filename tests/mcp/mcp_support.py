"""Test support: MCP server processes on 127.0.0.1 (free ports), stopped by the fixtures, and
the same servers in this process (:func:`serve_in_memory`)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition

from support.launch import PYTHON
from support.processes import free_port, stop_process, wait_closed, wait_listening

SERVERS = Path(__file__).parent / "servers"
ECHO = SERVERS / "echo_server.py"
IN_MEMORY = "in-memory"
"""The command of a stdio card whose server runs in this process: ``args`` are the server's
script and its arguments (see :func:`serve_in_memory`)."""


@functools.cache
def in_process_server(script: Path, *argv: str) -> Any:
    """The ``server`` of ``script`` loaded in this process as if run with ``argv`` (the
    warning filters it sets while loaded reverted)."""
    name = "_".join([script.stem, "in_memory", *argv])
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved, sys.argv = sys.argv, [str(script), *argv]
    try:
        with warnings.catch_warnings():
            spec.loader.exec_module(module)
    finally:
        sys.argv = saved
    return module.server


def serve_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A card whose ``command`` is :data:`IN_MEMORY` connects to its server in this process
    over the SDK's in-memory streams (fastmcp's ``FastMCPTransport``), for tests whose subject
    is not the transport; every other card connects as it would."""
    from fastmcp.client.transports import FastMCPTransport

    from toolcards.tools.mcp import MCPTool

    real = MCPTool._transport

    def transport(card: MCPTool) -> Any:
        if card.command != IN_MEMORY:
            return real(card)
        script, *argv = card.args
        return FastMCPTransport(in_process_server(Path(script), *argv))

    monkeypatch.setattr(MCPTool, "_transport", transport)


class ServerProcess:
    """An HTTP MCP server process that can be killed and restarted on the same port."""

    def __init__(self, script: Path, mode: str, env: dict[str, str] | None = None) -> None:
        self.script = script
        self.mode = mode
        self.port = free_port()
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        path = "/sse" if self.mode == "sse" else "/mcp"
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> ServerProcess:
        argv = [PYTHON, str(self.script), self.mode, str(self.port)]
        self.proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL)
        wait_listening(self.port, self.proc)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            wait_closed(self.port)  # the server itself, not only its launcher, is gone
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout=5)
        self.proc = None


class Script:
    """A FunctionModel script: first turn calls ``calls``, second turn echoes the results."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.seen_tools: list[str] = []
        self.tool_defs: dict[str, ToolDefinition] = {}
        self.instructions: str | None = None

    def model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen_tools = [t.name for t in info.function_tools]
        self.tool_defs = {t.name: t for t in info.function_tools}
        self.instructions = info.instructions
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(
            isinstance(p, ToolReturnPart | RetryPromptPart) for p in last.parts
        ):
            return ModelResponse(parts=[TextPart(json.dumps(results_of(last)))])
        if not self.calls:
            return ModelResponse(parts=[TextPart("[]")])
        return ModelResponse(parts=[ToolCallPart(name, args) for name, args in self.calls])


def results_of(request: ModelRequest) -> list[str]:
    out: list[str] = []
    for part in request.parts:
        if isinstance(part, ToolReturnPart):
            out.append(str(part.content))
        elif isinstance(part, RetryPromptPart):
            out.append(f"RETRY: {part.model_response()}")
    return out


def make_agent(toolsets: Sequence[Any]) -> tuple[Agent[None, str], Script]:
    script = Script()
    agent: Agent[None, str] = Agent(FunctionModel(script.model), toolsets=list(toolsets))
    return agent, script


async def call_tools(
    agent: Agent[None, str], script: Script, calls: list[tuple[str, dict[str, Any]]]
) -> list[str]:
    """One agent run calling ``calls`` in one turn; the tool results as strings."""
    script.calls = calls
    result = await agent.run("go")
    return list(json.loads(result.output))
