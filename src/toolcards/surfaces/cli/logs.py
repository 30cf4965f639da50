"""The command line's log lines on stderr: every record that no handler of its own takes (a
test's, ``serve``'s operator lines) is written by :func:`escaped_logs`'s handler with every
hidden character escaped, so that no log line (a remote MCP server's error text in a
warning) acts on the terminal or reads as another record. Its own module: importing logging
costs a command a running server answers more than it may take."""

from __future__ import annotations

import logging
import sys

__all__ = ["ShownRecords", "escaped_logs"]


class ShownRecords(logging.Formatter):
    """A record as Python's plain ``%(message)s`` writes it, :func:`escaped`: its message on
    one line, each line of its traceback a line."""

    def format(self, record: logging.LogRecord) -> str:
        lines = [escaped(record.getMessage())]
        if record.exc_info:
            lines += map(escaped, self.formatException(record.exc_info).split("\n"))
        if record.stack_info:
            lines += map(escaped, self.formatStack(record.stack_info).split("\n"))
        return "\n".join(lines)


def escaped(text: str) -> str:
    """``text`` on one line with every hidden character (an escape sequence, a carriage
    return, a bidi control) written as its JSON escape and a line break as ``\\n``, as
    :func:`~toolcards.governance.approvals.view.escape_hidden` marks them. A backslash
    stays as it is: text escaped already (:func:`~toolcards.tools.mcp.toolset._short`)
    is not escaped twice."""
    if text.isascii() and text.isprintable():
        return text
    # lazy: pydantic_core, which a log line of printable ASCII (the usual one) does without
    from toolcards.governance.approvals.view import escaped_json

    return escaped_json(text).replace("\n", "\\n")


class _StderrLines(logging.Handler):
    """Warnings and worse on the stderr of the moment (a test's runner swaps it), as Python's
    last-resort handler writes them, but :class:`ShownRecords`."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(ShownRecords())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def escaped_logs() -> None:
    """Make :class:`_StderrLines` the handler of the records no handler takes
    (``logging.lastResort``, which wrote them raw: the command line sets up no other). A
    handler of the records' own (pytest's, ``serve``'s) keeps them, so none is written
    twice; on stdio ``serve``, stdout stays the protocol's."""
    if not isinstance(logging.lastResort, _StderrLines):
        logging.lastResort = _StderrLines()
