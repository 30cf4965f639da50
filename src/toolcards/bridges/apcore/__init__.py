"""apcore interop: apcore modules as pydantic-ai tools, and pydantic-ai tools as apcore modules.

Needs the optional extra: ``pip install 'toolcards[apcore]'``.
"""

from __future__ import annotations

from ._deps import INSTALL_HINT, require

for _package in ("apcore", "apcore_toolkit"):
    require(_package)

from .approval import BridgeApprovalHandler  # noqa: E402
from .describe import MODULE_ID_KEY  # noqa: E402
from .naming import assign_names  # noqa: E402
from .register import (  # noqa: E402
    RegistrationError,
    RegistrationResult,
    SkippedTool,
    register_toolset,
)
from .serve import build_cli, serve_cli, serve_mcp  # noqa: E402
from .toolset import ApcoreToolset  # noqa: E402

__all__ = [
    "INSTALL_HINT",
    "MODULE_ID_KEY",
    "ApcoreToolset",
    "BridgeApprovalHandler",
    "RegistrationError",
    "RegistrationResult",
    "SkippedTool",
    "assign_names",
    "build_cli",
    "register_toolset",
    "serve_cli",
    "serve_mcp",
]
