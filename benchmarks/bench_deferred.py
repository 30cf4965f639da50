"""Deferred tools over a large catalog: request bytes with and without ``defer_loading``.

A governed agent (``GovernedCards``, FunctionModel) gets a catalog of 5,000 tools (100 cards of 50
tools; 104 in quick mode, 8 cards of 13: the fewest that still hold the wanted tool). The
same task runs twice: with every tool sent to the model, and with the cards ``defer_loading``
(pydantic-ai's ToolSearch: the model searches, then calls what it found).
Each request is measured as JSON: instructions, messages, tool definitions. The deferred run
must send no tool definitions beyond the searched ones (checked: the script fails otherwise).

Run: .venv/bin/python benchmarks/bench_deferred.py [--quick]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _results import record

PER_DOMAIN = 50
WANTED = "tool_7_12"
QUERY = "k7x12"  # one word of the wanted tool's description, and of no other


@dataclass
class Measured:
    """What each model request carried."""

    requests: list[int] = field(default_factory=list)
    """Bytes of each request (instructions + messages + tool definitions)."""
    tool_bytes: list[int] = field(default_factory=list)
    tool_counts: list[int] = field(default_factory=list)
    searched: set[str] = field(default_factory=set)
    """Tool names the search returned."""


def make_cards(domains: int, defer: bool, per: int = PER_DOMAIN) -> list[Any]:
    from toolcards import ToolCard

    cards: list[Any] = []
    for d in range(domains):

        def tools(self: Any, d: int = d) -> list[Callable[..., Any]]:
            made = []
            for t in range(per):

                def fn(record_id: int, note: str = "") -> str:
                    return f"done {record_id}"

                fn.__name__ = f"tool_{d}_{t}"
                fn.__doc__ = (
                    f"Operation {t} on ledger {d}: updates entry kind k{d}x{t}.\n\n"
                    "Args:\n    record_id: The entry.\n    note: A free-form note."
                )
                made.append(fn)
            return made

        cls = type(f"Ledger{d}", (ToolCard,), {"get_tools": tools, "__module__": __name__})
        cards.append(cls(defer_loading=defer))
    return cards


def run(domains: int, defer: bool, per: int = PER_DOMAIN) -> tuple[Measured, str]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolSearchReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_core import to_json

    from toolcards.governance import Identity, Policy
    from toolcards.surfaces.agent import GovernedCards

    measured = Measured()

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        defs = [*info.function_tools, *info.output_tools]
        tools = len(to_json(defs)) + len(to_json(info.model_request_parameters.native_tools))
        body = len(ModelMessagesTypeAdapter.dump_json(messages)) + len(info.instructions or "")
        measured.requests.append(body + tools)
        measured.tool_bytes.append(tools)
        measured.tool_counts.append(len(defs))
        for message in messages:
            for part in getattr(message, "parts", ()):
                if isinstance(part, ToolSearchReturnPart):
                    measured.searched.update(m["name"] for m in part.content["discovered_tools"])
        step = len(measured.requests)
        if defer and step == 1:
            return ModelResponse(parts=[ToolCallPart("search_tools", {"queries": [QUERY]})])
        if step == (2 if defer else 1):
            return ModelResponse(parts=[ToolCallPart(WANTED, {"record_id": 7})])
        return ModelResponse(parts=[TextPart("finished")])

    rule = {"callers": ["agent.*"], "targets": ["tool_*"], "effect": "allow"}
    policy = Policy.from_dict({"default_effect": "deny", "rules": [rule]})
    me = Identity("agent.bench", type="agent")
    capability = GovernedCards(make_cards(domains, defer, per), policy=policy, identity=me)
    agent = Agent(FunctionModel(model), capabilities=[capability])
    output = agent.run_sync(f"Update entry {QUERY} for record 7").output
    return measured, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="104 tools (8 cards of 13) instead of 5,000"
    )
    # quick: ledger 7 holds the wanted tool, its 13th
    domains, per = (8, 13) if parser.parse_args().quick else (100, PER_DOMAIN)
    full, out_full = run(domains, defer=False, per=per)
    deferred, out_deferred = run(domains, defer=True, per=per)
    catalog = domains * per
    print(f"catalog: {catalog} governed tools; both runs end with {out_full!r}/{out_deferred!r}")
    for name, m in (("all tools sent", full), ("defer_loading + ToolSearch", deferred)):
        print(
            f"{name:28s} requests: {len(m.requests)}  bytes per request: "
            f"{', '.join(f'{b:,}' for b in m.requests)}  total: {sum(m.requests):,}  "
            f"tool definitions per request: {m.tool_counts}"
        )
    ratio = sum(full.requests) / sum(deferred.requests)
    print(
        f"deferred run: {sum(deferred.requests):,} bytes vs {sum(full.requests):,} "
        f"({ratio:.0f}x less)"
    )
    print(f"searched tools: {sorted(deferred.searched)}")
    record(
        f"request bytes per run, {catalog}-tool catalog, deferred",
        sum(deferred.requests),
        "B",
        peer="all tools sent",
        peer_value=sum(full.requests),
    )
    # the claim the benchmark stands for: no definitions beyond what the search found
    most = max(deferred.tool_counts)
    if most > len(deferred.searched) + 1 or WANTED not in deferred.searched:
        raise SystemExit(f"deferred run sent {most} tool definitions, searched {deferred.searched}")
    if out_full != out_deferred:
        raise SystemExit("the two runs did not end alike")


if __name__ == "__main__":
    main()
