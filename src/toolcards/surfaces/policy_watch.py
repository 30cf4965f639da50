"""While a server runs, its policy file is watched: a file that breaks is said on stderr at
once (the server goes on with the last good policy), and so is the fix. MCP clients hear it
as a logging notification (the policy logs it for everyone, see
:data:`toolcards.governance.policy.policy.EVERYONE`); the dashboard shows it in a banner.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolcards.governance.policy.policy import Policy

__all__ = ["policy_notice", "watching_policy"]


def policy_notice(policy: Policy) -> str:
    """The line that tells an operator how the policy stands now."""
    if policy.error is None:
        return "policy reloaded: the policy file is valid again"
    if policy.loaded:
        return f"error: {policy.error} (still serving the last good policy until it is fixed)"
    return f"error: {policy.error} (every call is refused until it is fixed)"


def _to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


@contextlib.asynccontextmanager
async def watching_policy(
    policy: Policy, say: Callable[[str], None] = _to_stderr
) -> AsyncIterator[None]:
    """Check ``policy``'s file every ``reload_interval`` seconds for the block; each change
    between broken and valid is one line given to ``say``."""
    import anyio

    async def watch() -> None:
        last = policy.error
        while True:
            policy.check_reload()
            if policy.error != last:
                last = policy.error
                say(policy_notice(policy))
            await anyio.sleep(max(policy.reload_interval, 0.05))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        try:
            yield
        finally:
            tasks.cancel_scope.cancel()
