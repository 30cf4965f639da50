"""A store that cannot be opened is one clear error naming the path and the fix."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolcards.runtime import StoreError, Team


def test_a_directory_as_store(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=rf"{tmp_path} is a directory; .*team\.db"):
        Team("t", store=tmp_path)


@pytest.mark.parametrize("where", ["/proc/self/team.db", "/sys/team.db", "/dev/team.db"])
def test_a_system_location(where: str) -> None:
    with pytest.raises(StoreError, match="system directory"):
        Team("t", store=where)


def test_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    junk = tmp_path / "notes.db"
    junk.write_text("just some notes, not a database\n" * 100)
    with pytest.raises(StoreError, match=r"notes\.db: .*not a toolcards store"):
        Team("t", store=junk)
    assert junk.read_text().startswith("just some notes")  # left as it was


OPEN_AS_USER = textwrap.dedent(
    """
    import sys
    from toolcards.runtime import StoreError, Team
    try:
        Team("t", store=sys.argv[1])
    except StoreError as exc:
        print(exc)
    """
)


@pytest.mark.skipif(not shutil.which("bwrap"), reason="needs bwrap for a read-only mount")
def test_a_read_only_location(tmp_path: Path) -> None:
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    out = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--ro-bind", str(frozen), str(frozen),
         sys.executable, "-c", OPEN_AS_USER, str(frozen / "team.db")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    message = out.stdout.strip()
    assert "cannot open store" in message and "not writable" in message, out.stderr
    assert str(frozen) in message
    assert "Traceback" not in out.stdout + out.stderr
