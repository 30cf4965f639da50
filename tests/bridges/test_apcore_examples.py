"""The apcore examples run offline, in a fresh interpreter, and say what happened."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.launch import PYTHON

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

EXPECTED = {
    "apcore_acl": [
        "== running as agent.helpdesk",
        "hr_salary_read: failed: Access denied",
        "model: I saw: hr_directory_search=success, hr_salary_read=failed",
        "hr_salary_read: success: {'name': 'ada', 'salary': 120000}",
    ],
    "apcore_approval": [
        "refunded so far: []",
        "model: Outcomes: r1=success, r2=denied",
        "refunded: ['A-1']",
        "questions put to apcore's handler: 0",
        "refused: APPROVAL_DENIED",
    ],
    "apcore_scanner": [
        "modules in the registry: []",
        "registered: ['shop.lookup_item', 'shop.reserve_item', 'shop.purge_stock']",
        "skipped whoami: takes a RunContext",
        "no description for parameter(s) sku, quantity",
        "purge: failed: Access denied",
        "approved and resumed: {'sku': 'lamp', 'reserved': 1, 'left': 2}",
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_and_reports(name: str) -> None:
    folder = EXAMPLES / name
    assert {"README.md", "acl.yaml", "main.py"} <= {p.name for p in folder.iterdir()}
    done = subprocess.run(
        [PYTHON, str(folder / "main.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for line in EXPECTED[name]:
        assert line in done.stdout
