"""Child process of ``workspace_read``: one document (bytes on stdin) to Markdown (stdout).

Usage: ``python -m toolcards.tools.workspace.convert .pdf < file.pdf``. Run by ``docs.py`` with
a time limit; it imports MarkItDown only here, so a slow or hostile document never holds the
parent's interpreter.
"""

from __future__ import annotations

import io
import sys


def main() -> int:
    suffix = sys.argv[1] if len(sys.argv) > 1 else ""
    data = sys.stdin.buffer.read()
    from markitdown import MarkItDown  # lazy: extra docs (markitdown)

    try:
        result = MarkItDown(enable_plugins=False).convert_stream(
            io.BytesIO(data), file_extension=suffix
        )
    except Exception as exc:
        sys.stderr.write(f"{type(exc).__name__}\n")
        return 3
    sys.stdout.buffer.write(str(result.text_content or "").encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
