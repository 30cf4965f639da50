"""Tools that end a governed call each way (``ending_tools:TOOLS``), for the audit-invariant
tests on every surface.

``finish(how, tag)`` (sync, in a worker thread) returns (``how="ok"``), raises (``"error"``)
or outlasts a timeout below :data:`OUTLAST` seconds (``"timeout"``: until the test releases it,
:func:`released`, once the call's row is written); ``hold(tag)`` (async)
waits until its call is cancelled; ``finish_approved`` and ``hold_approved`` are ``finish``
and ``hold`` behind a human's approval; ``finish_budgeted`` is ``finish`` under a budget of no
calls (every call ends ``over_budget``). Each run first creates ``$ENDINGS_DIR/<tag>``, so a
test can wait until its call runs. :data:`POLICY` allows everything except a tag starting
with ``denied``.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from toolcards.core.spec import annotate

OUTLAST = 9.0
POLICY = """\
default_effect: allow
rules:
  - description: a call tagged denied is refused
    targets: ["*"]
    effect: deny
    conditions: {arguments: {tag: {glob: "denied*"}}}
budgets:
  - {name: none left, targets: [finish_budgeted], per: team, calls: 0}
"""


def marks() -> Path:
    """Where the marks go: ``$ENDINGS_DIR`` (this directory when unset)."""
    return Path(os.environ.get("ENDINGS_DIR") or ".")


def running(tag: str) -> None:
    """Announce that the call tagged ``tag`` runs (a file in :func:`marks`)."""
    if os.environ.get("ENDINGS_DIR"):
        (marks() / tag).touch()


def released(directory: Path, tag: str) -> Path:
    """The mark that lets the timed-out call tagged ``tag`` end (its thread stops waiting)."""
    return directory / f"{tag}.released"


def finish(how: str, tag: str) -> str:
    """Ends as ``how`` says: ok, error or timeout."""
    running(tag)
    if how == "error":
        raise RuntimeError(f"{tag} failed on purpose")
    if how == "timeout":
        mark, deadline = released(marks(), tag), time.monotonic() + OUTLAST
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    return f"{tag} done"


async def hold(tag: str) -> str:
    """Waits until the call is cancelled."""
    running(tag)
    await asyncio.Event().wait()
    return f"{tag} released"


def finish_approved(how: str, tag: str) -> str:
    """Ends as ``how`` says (a human approves each call first)."""
    return finish(how, tag)


def finish_budgeted(how: str, tag: str) -> str:
    """Ends as ``how`` says (no call of it is ever within its budget)."""
    return finish(how, tag)


async def hold_approved(tag: str) -> str:
    """Waits until the call is cancelled (a human approves each call first)."""
    return await hold(tag)


TOOLS = [  # long-running: MCP runs each as a task when a client asks for one
    annotate(finish, long_running=True),
    annotate(hold, long_running=True),
    annotate(finish_budgeted, long_running=True),
    annotate(finish_approved, requires_approval=True, long_running=True),
    annotate(hold_approved, requires_approval=True, long_running=True),
]
