"""Tools for the server-behaviour tests (``slow_tools:TOOLS``): sleeping, CPU-bound,
progress-reporting, logging and content-returning tools; and a prompt that logs
(``slow_tools:PROMPTS``)."""

from __future__ import annotations

import asyncio
import logging
import time

from pydantic_ai.messages import BinaryContent

from toolcards.core.progress import report_progress

log = logging.getLogger("toolcards.tests.slow_tools")
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def nap(seconds: float) -> str:
    """Sleeps (a sync tool: it runs in a worker thread); reports progress 0 as it starts."""
    report_progress(0, seconds, "started")
    time.sleep(seconds)
    return f"slept {seconds}"


async def nap_async(seconds: float) -> str:
    """Sleeps without a thread; reports progress 0 as it starts."""
    report_progress(0, seconds, "started")
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


def crunch(seconds: float) -> int:
    """Pure-Python arithmetic for ``seconds``, yielding the interpreter between chunks;
    reports progress 0 as it starts."""
    report_progress(0, seconds, "started")
    end = time.monotonic() + seconds
    total = 0
    while time.monotonic() < end:
        for i in range(20_000):
            total = (total + i * i) % 1_000_003
        time.sleep(0)
    return total


def steps(count: int) -> str:
    """Reports progress ``count`` times and logs each step."""
    for i in range(1, count + 1):
        log.info("step %d of %d", i, count)
        report_progress(i, count, f"step {i}")
    log.debug("all steps done")
    return f"{count} steps"


def picture() -> BinaryContent:
    """Returns a 1x1 PNG."""
    return BinaryContent(data=PNG, media_type="image/png")


TOOLS = [nap, nap_async, crunch, steps, picture]


def briefing() -> str:
    """A prompt that logs as it is made."""
    log.info("briefing made")
    return "Take it step by step."


PROMPTS = [briefing]
