"""The vector store's modules import each other without a circle (lazy imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import toolcards.tools.vector_store as package

PREFIX = "toolcards.tools.vector_store."


def imports_of(path: Path) -> set[str]:
    """Sibling modules ``path`` imports anywhere (top level, functions, TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n[len(PREFIX) :].split(".")[0] for n in names if n.startswith(PREFIX))
    return found


def test_no_module_of_the_vector_store_imports_itself_back() -> None:
    folder = Path(package.__file__).parent
    graph = {p.stem: imports_of(p) - {p.stem} for p in folder.glob("*.py") if p.stem != "__init__"}
    graph = {name: {d for d in deps if d in graph} for name, deps in graph.items()}
    state: dict[str, int] = {}

    def cycle_from(node: str, path: list[str]) -> list[str]:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep] if dep in path else [node, dep]
            if dep not in state and (found := cycle_from(dep, [*path, dep])):
                return found
        state[node] = 2
        return []

    cycles = [c for name in sorted(graph) if name not in state and (c := cycle_from(name, [name]))]
    assert cycles == []
    assert "openai_provider" not in graph["embeddings"]
    assert "embeddings" not in graph["openai_provider"]
