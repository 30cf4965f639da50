"""What a guardrail hook adds to one governed call, beside what a pydantic-ai capability hook
adds to one tool call of an agent run, in the same run.

- ours: ``Executor.call`` of an async tool with no hooks, one pass-through input hook, one
  pass-through output hook, both, an input hook that rewrites the arguments (the rewrite is
  checked again: schema and policy), and the built-in ``SecretScanner`` on a clean and on a
  secret-bearing result;
- the peer: an agent run whose model asks for ``K`` tool calls in one response, without and
  with a capability overriding ``before_tool_execute`` and ``after_tool_execute``
  (pass-through); the difference over ``K`` is that pair's cost per tool call.

Each figure is the best of several rounds (the one least disturbed by other processes); the
cases, and the two agents, take turns round by round.

Run: .venv/bin/python benchmarks/bench_guardrails.py [--quick]

``--quick`` runs every section once at tiny sizes (a smoke run: its figures mean little).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _results import record

from toolcards.governance import (
    CapabilityRegistry,
    Executor,
    Identity,
    Policy,
    SecretScanner,
    ToolHook,
)
from toolcards.governance.guardrails import HookContext

ALICE = Identity("alice", "user", roles=["admin"])
POLICY = {"default_effect": "deny", "rules": [{"targets": ["echo"], "effect": "allow"}]}


async def echo(text: str) -> str:
    """Give the text back."""
    return text


class PassIn(ToolHook):
    name = "pass_in"

    def before_call(self, ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return args


class PassOut(ToolHook):
    name = "pass_out"

    def after_call(self, ctx: HookContext, result: Any) -> Any:
        return result


class Rewrite(ToolHook):
    """Changes the arguments, so the executor checks the rewritten call again."""

    name = "rewrite"

    def before_call(self, ctx: HookContext, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "text": args["text"].strip()}


async def _round_us(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await fn()
    return (time.perf_counter() - start) / n * 1e6


async def ours(n: int, rounds: int) -> dict[str, float]:
    """Each case's best round; the cases take turns round by round, so a burst of load on
    the machine falls on all of them alike."""
    registry = CapabilityRegistry.from_tools([echo])
    policy = Policy.from_dict(POLICY)
    clean = {"text": "nothing to hide here"}
    secret = {"text": "the key is AKIAIOSFODNN7EXAMPLE, keep it"}
    cases: list[tuple[str, list[ToolHook], dict[str, Any]]] = [
        ("no hooks", [], clean),
        ("one input hook (pass-through)", [PassIn()], clean),
        ("one output hook (pass-through)", [PassOut()], clean),
        ("input + output hook (pass-through)", [PassIn(), PassOut()], clean),
        ("input hook that rewrites (re-checked)", [Rewrite()], {"text": " padded "}),
        ("SecretScanner, clean result", [SecretScanner()], clean),
        ("SecretScanner, result with a secret", [SecretScanner()], secret),
    ]
    calls: dict[str, Callable[[], Awaitable[Any]]] = {}
    for name, hooks, args in cases:
        executor = Executor(registry, policy, timeout=30.0, hooks=hooks)
        result = await executor.call("echo", args, ALICE)
        assert result.ok, result  # the case must measure a call that ran
        calls[name] = functools.partial(executor.call, "echo", args, ALICE)
        await _round_us(calls[name], min(n, 200))  # warm-up
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(rounds):
        for name, call in calls.items():
            best[name] = min(best[name], await _round_us(call, n))
    return best


def _agent(calls: int, hooked: bool) -> Any:
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:  # the prompt: ask for every tool call at once
            parts = [ToolCallPart("echo", {"text": f"t{i}"}) for i in range(calls)]
            return ModelResponse(parts=list(parts))
        return ModelResponse(parts=[TextPart("done")])

    class PassThrough(AbstractCapability[Any]):
        async def before_tool_execute(
            self, ctx: RunContext[Any], *, call: Any, tool_def: Any, args: Any
        ) -> Any:
            return args

        async def after_tool_execute(
            self, ctx: RunContext[Any], *, call: Any, tool_def: Any, args: Any, result: Any
        ) -> Any:
            return result

    agent: Agent[None, str] = Agent(
        FunctionModel(respond), capabilities=[PassThrough()] if hooked else []
    )
    agent.tool_plain(echo)
    return agent


async def peer(calls: int, rounds: int) -> tuple[float, float]:
    """(us per tool call without hooks, us added per tool call by the pass-through pair):
    the best of ``rounds`` runs each, the two agents taking turns."""
    agents = {False: _agent(calls, False), True: _agent(calls, True)}
    best = dict.fromkeys(agents, float("inf"))
    for agent in agents.values():
        await agent.run("go")  # warm-up
    for _ in range(rounds):
        for hooked, agent in agents.items():
            start = time.perf_counter()
            result = await agent.run("go")
            best[hooked] = min(best[hooked], time.perf_counter() - start)
            assert result.output == "done"
    plain, hooked_us = best[False] / calls * 1e6, best[True] / calls * 1e6
    return plain, hooked_us - plain


async def main(quick: bool) -> None:
    n, rounds, calls = (200, 1, 20) if quick else (3_000, 15, 200)
    figures = await ours(n, rounds)
    base = figures["no hooks"]
    print(f"{'Executor.call of an async tool':44} {'us/call':>9} {'added us':>9}")
    for name, per in figures.items():
        added = "" if name == "no hooks" else f"{per - base:9.2f}"
        print(f"{name:44} {per:9.2f} {added:>9}")
    per_tool, peer_added = await peer(calls, rounds)
    pair = figures["input + output hook (pass-through)"] - base
    print(
        f"\npydantic-ai agent run, {calls} tool calls in one response: {per_tool:.2f} us per "
        f"tool call; a pass-through before/after_tool_execute capability adds {peer_added:.2f} us"
    )
    print(f"toolcards: a pass-through input + output hook pair adds {pair:.2f} us per call")
    record(
        "guardrails: a pass-through input + output hook pair, added per call",
        pair,
        "us",
        peer="pydantic-ai capability before/after_tool_execute, added per tool call",
        peer_value=peer_added,
    )
    record(
        "guardrails: an input hook that rewrites (re-checked), added per call",
        figures["input hook that rewrites (re-checked)"] - base,
        "us",
    )
    record(
        "guardrails: SecretScanner on a clean result, added per call",
        figures["SecretScanner, clean result"] - base,
        "us",
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every section once at tiny sizes (200 calls, 1 round; 20 tool calls per run)",
    )
    asyncio.run(main(parser.parse_args().quick))
