"""Runs the edit corpus (``edit_corpus/cases_*.json``) through ``workspace_edit``.

Usage: ``python tests/workspace/corpus.py`` prints the report (applied correctly, refused
correctly, wrong applies, missed). The test suite runs the same function.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "edit_corpus"


@dataclass
class Report:
    applied_correctly: int = 0
    refused_correctly: int = 0
    wrong_applies: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    by_category: Counter[str] = field(default_factory=Counter)

    @property
    def total(self) -> int:
        return (
            self.applied_correctly
            + self.refused_correctly
            + len(self.wrong_applies)
            + len(self.missed)
        )

    def render(self) -> str:
        lines = [
            f"edit corpus: {self.total} requests",
            f"  applied correctly: {self.applied_correctly}",
            f"  refused correctly: {self.refused_correctly}",
            f"  wrong applies:     {len(self.wrong_applies)}",
            f"  missed (refused, should apply / wrong refusal reason): {len(self.missed)}",
            "  by category:",
            *(f"    {cat}: {n}" for cat, n in sorted(self.by_category.items())),
        ]
        lines += [f"  WRONG {x}" for x in self.wrong_applies]
        lines += [f"  MISSED {x}" for x in self.missed]
        return "\n".join(lines)


def load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for path in sorted(CORPUS.glob("cases_*.json")):
        cases.extend(json.loads(path.read_text(encoding="utf-8")))
    return cases


def run_corpus(root: Path) -> Report:
    """Run every case in its own workspace under ``root``."""
    from toolcards.core.errors import RetriableError
    from toolcards.tools.workspace.card import WorkspaceTool

    os.environ["TOOLCARDS_WORKSPACES_ROOT"] = str(root)
    sources: dict[str, str] = json.loads((CORPUS / "sources.json").read_text(encoding="utf-8"))
    report = Report()
    for case in load_cases():
        card = WorkspaceTool(workspace_id=f"case-{case['id']}")
        tools = {fn.__name__: fn for fn in card.get_tools()}
        target = root / f"case-{case['id']}" / case["file"]
        target.parent.mkdir(parents=True, exist_ok=True)
        original = case.get("content", sources.get(case["file"], "")).encode("utf-8")
        target.write_bytes(original)
        tools["workspace_read"](case["file"])
        if case.get("disk_change"):
            before, after = case["disk_change"]
            original = target.read_bytes().replace(before.encode(), after.encode(), 1)
            target.write_bytes(original)
        report.by_category[case["category"]] += 1
        try:
            tools["workspace_edit"](
                case["file"], case["old_string"], case["new_string"], case.get("replace_all", False)
            )
        except RetriableError as exc:
            unchanged = target.read_bytes() == original
            if case["expect"] == "refused" and unchanged and case["error_contains"] in str(exc):
                report.refused_correctly += 1
            elif not unchanged:
                report.wrong_applies.append(f"{case['id']} changed the file and failed")
            else:
                report.missed.append(f"{case['id']} ({case['category']}): {exc}")
            continue
        result = target.read_bytes()
        if case["expect"] == "applied" and result == case["expected_content"].encode("utf-8"):
            report.applied_correctly += 1
        else:
            report.wrong_applies.append(f"{case['id']} ({case['category']})")
    return report


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    with tempfile.TemporaryDirectory() as tmp:
        print(run_corpus(Path(tmp)).render())
