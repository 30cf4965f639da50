"""Small cards used by the core tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import Field

from toolcards.core import BaseToolParam, Channels, RetriableError, ToolCard, annotate


class EchoParam(BaseToolParam):
    prefix: str = "echo: "


class EchoCard(ToolCard):
    """A small test card: one sync tool, one async tool, one command."""

    echo: bool | EchoParam = True
    tag: str = "A"

    def get_tools(self) -> list[Callable[..., Any]]:
        param = self.exposed("echo", Channels.TOOL_CALL)
        if not isinstance(param, EchoParam):
            return []
        prefix = param.prefix

        def echo(text: str) -> str:
            """Repeat the text.

            Args:
                text: What to repeat.
            """
            if text == "bad":
                raise RetriableError("say something else")
            return prefix + text

        async def echo_async(text: str) -> str:
            """Repeat the text, asynchronously."""
            if text == "bad":
                raise RetriableError("async: say something else")
            return prefix + text

        annotate(echo, readonly=True)
        return [echo, echo_async]

    def get_commands(self) -> list[Callable[..., Any]]:
        def shout(text: str) -> str:
            """Upper-case the text."""
            return text.upper()

        return [shout]


class DependentCard(ToolCard):
    needs: list[str] = Field(default_factory=list)
    wants: list[str] = Field(default_factory=list)

    @property
    def depends_on(self) -> list[str]:
        return list(self.needs)

    @property
    def optional_depends_on(self) -> list[str]:
        return list(self.wants)


class OtherCard(ToolCard):
    def get_tools(self) -> list[Callable[..., Any]]:
        def echo(text: str) -> str:
            """Clashes with EchoCard's echo."""
            return text

        return [echo]
