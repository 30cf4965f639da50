"""Card-layer costs: `import toolcards`, building a factory of 50 cards, listing its toolset.

Run: .venv/bin/python benchmarks/bench_factory.py [--quick]

``--quick``: one import run, 3 builds and 20 warm listings (7, 21 and 200 otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from _results import record


def import_time(runs: int) -> tuple[float, float]:
    """Median seconds for `import toolcards` and for `import toolcards; toolcards.ToolCard`."""
    code = "import time;t=time.perf_counter();import toolcards{};print(time.perf_counter()-t)"
    plain, core = [], []
    for _ in range(runs):
        for out, extra in ((plain, ""), (core, ";toolcards.ToolCard")):
            res = subprocess.run(
                [sys.executable, "-c", code.format(extra)],
                capture_output=True,
                text=True,
                check=True,
            )
            out.append(float(res.stdout.strip()))
    return statistics.median(plain), statistics.median(core)


def make_cards(n: int) -> list[Any]:
    from toolcards import ToolCard

    cards: list[Any] = []
    for i in range(n):

        def tools(self: Any, i: int = i) -> list[Callable[..., Any]]:
            def fn(text: str, count: int = 1) -> str:
                """Repeat text.

                Args:
                    text: The text.
                    count: How often.
                """
                return text * count

            fn.__name__ = f"tool_{i}"
            return [fn]

        cls = type(f"BenchCard{i}", (ToolCard,), {"get_tools": tools, "__module__": __name__})
        cards.append(cls())
    return cards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 import run, 3 builds, 20 listings")
    args = parser.parse_args()
    runs = 1 if args.quick else 7
    listings = 20 if args.quick else 200
    plain, core = import_time(runs)
    print(f"import toolcards (fresh process, median of {runs}): {plain * 1000:.1f} ms")
    print(f"import toolcards + core contracts (pydantic):       {core * 1000:.1f} ms")
    record("import toolcards, fresh process", plain * 1000, "ms", goal="< 300 ms")

    from pydantic_ai.models.test import TestModel
    from pydantic_ai.tools import RunContext
    from pydantic_ai.usage import RunUsage

    from toolcards import ToolFactory

    cards = make_cards(50)
    builds = []
    for _ in range(runs * 3):
        for card in cards:
            card._observer_ref = None
        start = time.perf_counter()
        factory = ToolFactory(cards)
        builds.append(time.perf_counter() - start)
    build_us = statistics.median(builds) * 1e6
    print(f"ToolFactory of 50 cards (median):                   {build_us:.0f} us")
    record("ToolFactory of 50 cards", build_us, "us")

    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())

    async def list_tools() -> tuple[float, float]:
        first_start = time.perf_counter()
        toolset = factory.toolset()
        tools = await toolset.get_tools(ctx)
        first = time.perf_counter() - first_start
        assert len(tools) == 50
        again = []
        for _ in range(listings):
            start = time.perf_counter()
            await toolset.get_tools(ctx)
            again.append(time.perf_counter() - start)
        return first, statistics.median(again)

    first, again = asyncio.run(list_tools())
    print(f"toolset(): build + first listing of 50 tools:       {first * 1000:.2f} ms")
    print(f"toolset listing, 50 tools (median, warm):           {again * 1e6:.0f} us")
    record("toolset() build + first listing of 50 tools", first * 1000, "ms")


if __name__ == "__main__":
    main()
