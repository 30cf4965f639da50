"""apcore modules as a pydantic-ai toolset."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from apcore import Executor, Registry
from apcore.errors import ApprovalPendingError
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ApprovalRequired, ModelRetry
from pydantic_ai.tools import AgentDepsT, ToolDefinition
from pydantic_ai.toolsets.abstract import AbstractToolset, ToolsetTool
from pydantic_ai.toolsets.external import TOOL_SCHEMA_VALIDATOR

from toolcards.core.names import glob_matcher

from . import approval
from .describe import MODULE_ID_KEY, is_discoverable, shape
from .guard import clean_arguments, report
from .identity import build_context, to_apcore_identity
from .naming import assign_names

IdentityResolver = Callable[[RunContext[Any]], Any]


def _matches(module_id: str, patterns: Sequence[str] | None) -> bool:
    return glob_matcher(patterns or ())(module_id)


class ApcoreToolset(AbstractToolset[AgentDepsT]):
    """Offer the modules of an apcore registry to a pydantic-ai agent.

    Every call runs through the apcore executor (ACL, approval gate, input validation,
    middleware) as the resolved caller identity. apcore errors reach the model as retries or
    failed tool results; the run continues.

    Construction installs a :class:`~toolcards.bridges.apcore.BridgeApprovalHandler` on the
    executor, wrapping the handler it had: pydantic-ai approvals are honoured once per call,
    and calls needing approval without an approver are rejected instead of skipped.
    """

    def __init__(
        self,
        registry: Registry,
        executor: Executor,
        *,
        identity: Any | None = None,
        identity_resolver: IdentityResolver | None = None,
        include: Sequence[str] | None = None,
        exclude: Sequence[str] | None = None,
        toolset_id: str | None = None,
        max_retries: int = 1,
        sanitize_tool_names: bool = True,
        approvals_asked: bool = False,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.registry = registry
        self.executor = executor
        self.identity = to_apcore_identity(identity)
        self.identity_resolver = identity_resolver
        self.include = list(include) if include is not None else None
        self.exclude = list(exclude or ())
        self.max_retries = max_retries
        self.sanitize_tool_names = sanitize_tool_names
        self._id = toolset_id
        self.approvals_asked = approvals_asked
        """Every call comes from toolcards' executor, which asks a human for each module whose
        metadata requires approval (:func:`.serve.module_capabilities`): such a call that
        reaches :meth:`call_tool` was approved, though its context (one listing's) says not."""
        self.approval_handler = approval.install(executor)

    @property
    def id(self) -> str | None:
        return self._id

    def module_ids(self) -> list[str]:
        """Module ids offered to the model: discoverable, included and not excluded."""
        selected = []
        for module_id in self.registry.list():
            if self.include is not None and not _matches(module_id, self.include):
                continue
            if _matches(module_id, self.exclude):
                continue
            selected.append(module_id)
        return selected

    def tool_names(self) -> dict[str, str]:
        """Module id -> the tool name the model sees."""
        return assign_names(self.module_ids(), sanitize=self.sanitize_tool_names)

    async def get_tools(self, ctx: RunContext[AgentDepsT]) -> dict[str, ToolsetTool[AgentDepsT]]:
        tools: dict[str, ToolsetTool[AgentDepsT]] = {}
        for module_id, name in self.tool_names().items():
            descriptor = self.registry.get_definition(module_id)
            if descriptor is None or not is_discoverable(descriptor):
                continue
            tool_shape = shape(descriptor)
            tool_def = ToolDefinition(
                name=name,
                parameters_json_schema=tool_shape.parameters,
                description=tool_shape.description,
                sequential=tool_shape.destructive,
                kind="unapproved" if tool_shape.requires_approval else "function",
                metadata=tool_shape.metadata,
            )
            tools[name] = ToolsetTool(
                toolset=self,
                tool_def=tool_def,
                max_retries=self.max_retries,
                args_validator=TOOL_SCHEMA_VALIDATOR,
            )
        return tools

    async def _caller(self, ctx: RunContext[AgentDepsT]) -> Any:
        if self.identity_resolver is None:
            return self.identity
        resolved = self.identity_resolver(ctx)
        if inspect.isawaitable(resolved):
            resolved = await resolved
        return to_apcore_identity(resolved)

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[AgentDepsT],
        tool: ToolsetTool[AgentDepsT],
    ) -> Any:
        metadata = tool.tool_def.metadata or {}
        module_id = str(metadata.get(MODULE_ID_KEY, name))
        if not isinstance(tool_args, dict):
            raise ModelRetry("Tool arguments must be a JSON object.")
        args = clean_arguments(tool_args, tool.tool_def.parameters_json_schema, module_id)
        gated = bool(metadata.get("requires_approval"))
        approved = bool(ctx.tool_call_approved) or (gated and self.approvals_asked)
        if gated and not approved:
            raise ApprovalRequired(metadata={MODULE_ID_KEY: module_id})
        context = build_context(await self._caller(ctx))
        can_retry = ctx.retry < tool.max_retries
        with approval.bound_call(module_id, approved=approved) as token:
            inputs = dict(args)
            if token is not None:
                inputs[approval.TOKEN_FIELD] = token
            try:
                return await self.executor.call_async(module_id, inputs, context)
            except ApprovalPendingError as error:
                if not approved and _asked_by_bridge(error):
                    # apcore wants approval (e.g. an ACL rule): ask pydantic-ai's approver.
                    raise ApprovalRequired(metadata={MODULE_ID_KEY: module_id}) from error
                report(error, module_id=module_id, can_retry=can_retry)
            except Exception as error:  # every apcore failure becomes model-readable
                report(error, module_id=module_id, can_retry=can_retry)


def _asked_by_bridge(error: ApprovalPendingError) -> bool:
    result = getattr(error, "result", None)
    meta = getattr(result, "metadata", None) or {}
    return bool(meta.get("source") == approval.APPROVER)
