"""Tools and guardrail hooks for the served-guardrail tests (``guard_tools:TOOLS`` and
``guard_tools:HOOKS`` in a surfaces config)."""

from __future__ import annotations

from typing import Any

from toolcards.governance import HookContext, Refuse, SecretScanner, input_guardrail

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
POLICY = """
default_effect: deny
rules:
  - {targets: ["read_env", "wipe"], effect: allow, callers: ["local.user"]}
"""


def read_env(service: str) -> str:
    """A service's environment file."""
    return f"SERVICE={service}\nAWS_ACCESS_KEY_ID={AWS_KEY}\n"


def wipe(target: str) -> str:
    """Wipe a target."""
    return f"wiped {target}"


@input_guardrail(tools=["wipe"])
def never_wipe_prod(ctx: HookContext, args: dict[str, Any]) -> Any:
    return Refuse("production is never wiped") if args["target"] == "prod" else args


TOOLS = [read_env, wipe]
HOOKS = [never_wipe_prod, SecretScanner()]
