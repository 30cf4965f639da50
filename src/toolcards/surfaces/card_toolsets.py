"""The tools of card-contributed toolsets (MCP servers) on the surfaces.

An ``MCPTool`` card contributes a toolset rather than tool functions; its tools are known only
once the server is asked. :func:`toolset_registry` asks once, when the surface starts, and
turns every tool found into a governed capability (the same policy, audit and approvals as the
card tools). A call made outside a running server connects for that call; a running server
keeps each toolset connected while it serves (:func:`connected`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from toolcards.core.threads import background_thread

if TYPE_CHECKING:
    from pydantic_ai.toolsets import AbstractToolset

    from toolcards.governance.capability import CapabilityRegistry


def toolset_registry(toolsets: Sequence[AbstractToolset[Any]]) -> CapabilityRegistry:
    """Capabilities of every tool of ``toolsets``, listed now (each toolset connects for the
    listing and closes again). A server that cannot be reached lists no tools: its toolset
    logs why."""
    import anyio
    from pydantic_ai.toolsets import CombinedToolset

    from toolcards.governance.capability import CapabilityRegistry

    combined = CombinedToolset(list(toolsets))
    found: list[CapabilityRegistry] = []
    failed: list[BaseException] = []

    def list_them() -> None:  # its own event loop, whether or not the caller runs one
        try:
            found.append(anyio.run(CapabilityRegistry.from_toolset, combined))
        except BaseException as exc:
            failed.append(exc)

    worker = background_thread(list_them, name="toolcards-list-toolsets", daemon=False)
    worker.start()
    worker.join()
    if failed:
        raise failed[0]
    return found[0]


@contextlib.asynccontextmanager
async def connected(toolsets: Sequence[AbstractToolset[Any]]) -> AsyncIterator[None]:
    """Keep ``toolsets`` connected (entered) for the duration of the block."""
    async with contextlib.AsyncExitStack() as stack:
        for toolset in toolsets:
            await stack.enter_async_context(toolset)
        yield
