"""Run the official MCP conformance suite's server scenarios against `toolcards serve`.

    python tests/surfaces/conformance/run.py [--transport http|stdio] [--scenario NAME]
        [--revision 2025-11-25|2026-07-28]

Needs Node and the npm package ``@modelcontextprotocol/conformance`` (``.ci/run`` installs it
under ``.ci/node_modules``; ``CONFORMANCE_DIR`` points elsewhere, several directories
separated by ``:``). Each revision is run by the first suite found that knows it: 0.1.x knows
2025-11-25; 2026-07-28 needs 0.2 (``npm install --prefix DIR
conformance-next@npm:@modelcontextprotocol/conformance@0.2.0-alpha.12``), run with
``--requirements 2026-07-28`` (exactly the scenarios that revision requires; the ones it does
not score are left out of the count). Node 20 lacks ``fs.globSync``: ``.ci/globsync.mjs`` adds
it through ``node --import``. The suite speaks streamable HTTP; ``--transport stdio`` puts a
relay (``stdio_relay.py``) in front of a stdio server. Prints the suite's summary; exits
non-zero when any check of a scenario for a declared capability fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parents[1]))  # tests: run as a script too

from support.processes import free_port, stop_process, wait_listening  # noqa: E402

POLYFILL = REPO / ".ci" / "globsync.mjs"
PACKAGE = "@modelcontextprotocol/conformance"
# scenarios for client features a governed tool does not drive itself (sampling, elicitation
# forms of the test server)
UNDECLARED = {
    "tools-call-sampling",
    "tools-call-elicitation",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
}
REVISIONS = ("2025-11-25", "2026-07-28")
PACKAGES = (PACKAGE, "conformance-next")  # a newer suite beside the default one (npm alias)
# 2026-07-28: the multi-round-trip scenarios need the test server's own tools that ask the
# client for input (elicitation, sampling, roots), as the elicitation/sampling ones above do
UNDECLARED_2026 = {
    f"input-required-result-{name}"
    for name in ("basic-elicitation", "basic-sampling", "basic-list-roots", "request-state",
                 "multiple-input-requests", "multi-round", "non-tool-request", "result-type",
                 "tampered-state", "capability-check")
}  # fmt: skip
# single checks of a scenario counted otherwise: a test tool that needs the sampling capability
UNDECLARED_CHECKS = {
    "server-stateless:sep-2575-server-rejects-undeclared-capability",
    "server-stateless:sep-2575-missing-capability-http-400",
}
# checks of the HTTP answer itself (status codes, header checks): over stdio that answer is the
# relay's, not the server's, so they count over HTTP only
HTTP_CHECKS = re.compile(r"^sep-2575-http-server-")
SCENARIO_TIMEOUT_MS = 120_000  # the 0.2 suite's default, 30 s, runs out on a loaded machine


def undeclared(revision: str = REVISIONS[0]) -> set[str]:
    """Scenarios of ``revision`` for client features, not counted."""
    return UNDECLARED | (UNDECLARED_2026 if revision == "2026-07-28" else set())


def suite_entry(revision: str = REVISIONS[0]) -> Path | None:
    """The first installed suite that knows ``revision`` (None: none does)."""
    found = os.environ.get("CONFORMANCE_DIR")
    bases = [Path(b) for b in found.split(os.pathsep) if b] if found else [REPO / ".ci"]
    for base in bases:
        for package in PACKAGES:
            entry = base / "node_modules" / package / "dist" / "index.js"
            if entry.exists() and revision in entry.read_text(encoding="utf-8", errors="replace"):
                return entry
    return None


def start_server(transport: str, port: int) -> subprocess.Popen[bytes]:
    toolcards = str(Path(sys.executable).parent / "toolcards")
    config = str(HERE / "toolcards.yaml")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
    }
    if transport == "http":
        argv = [toolcards, "serve", "--config", config, "--transport", "http", "--port", str(port)]
    else:
        serve = [toolcards, "serve", "--config", config]
        argv = [sys.executable, str(HERE / "stdio_relay.py"), str(port), "--", *serve]
    return subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def parse_summary(text: str, scenario: str | None = None) -> dict[str, tuple[int, int]]:
    found = {}
    for name, passed, failed in re.findall(r"[✓✗] (\S+): (\d+) passed, (\d+) failed", text):
        found[name] = (int(passed), int(failed))
    single = re.search(r"Passed: (\d+)/\d+, (\d+) failed", text)
    if not found and scenario and single:  # one scenario prints no summary table
        found[scenario] = (int(single.group(1)), int(single.group(2)))
    return found


def parse_results(results: Path, transport: str = "http") -> dict[str, tuple[int, int]]:
    """Passed and failed checks per scenario from the suite's ``-o`` directory (one
    ``<side>-<scenario>-<time>/checks.json`` each); a check of :data:`UNDECLARED_CHECKS`
    (and over stdio of :data:`HTTP_CHECKS`) is not counted."""
    found: dict[str, tuple[int, int]] = {}
    for checks in sorted(results.glob("*/checks.json")):
        name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", checks.parent.name)
        rows = [
            r for r in json.loads(checks.read_text(encoding="utf-8"))
            if f"{name}:{r.get('id')}" not in UNDECLARED_CHECKS
            and not (transport == "stdio" and HTTP_CHECKS.match(str(r.get("id"))))
        ]  # fmt: skip
        passed = sum(1 for r in rows if r.get("status") == "SUCCESS")
        failed = sum(1 for r in rows if r.get("status") == "FAILURE")
        found[name] = (passed, failed)
    return found


def not_scored(text: str) -> set[str]:
    """The scenarios a ``--requirements`` run names as not scored for its revision."""
    block = text.split("Not scored for", 1)[1] if "Not scored for" in text else ""
    return set(re.findall(r"^\s+[✓✗] (\S+) \(", block, flags=re.MULTILINE))


Summary = dict[str, tuple[int, int]]


def run(
    transport: str, scenario: str | None = None, revision: str = REVISIONS[0]
) -> tuple[int, str, Summary]:
    """Run the suite (or one scenario) for ``revision``; a declared-capability scenario that
    fails is run once more on its own (the machine may be loaded; both runs' output is
    kept)."""
    skip = undeclared(revision)
    _code, output, summary = _run_once(transport, scenario, revision)
    if scenario is None:
        for name, (_ok, bad) in list(summary.items()):
            if bad and name not in skip:
                _code, again, single = _run_once(transport, name, revision)
                output += f"\n--- {name} again ---\n{again}"
                summary[name] = single.get(name, summary[name])
    failing = {k: v for k, v in summary.items() if v[1] and k not in skip}
    return (1 if failing or not summary else 0), output, summary


def _run_once(transport: str, scenario: str | None, revision: str) -> tuple[int, str, Summary]:
    entry = suite_entry(revision)
    node = shutil.which("node")
    if entry is None or node is None:
        raise FileNotFoundError(f"needs node and {PACKAGE} knowing {revision} (see .ci/run)")
    port = free_port()
    server = start_server(transport, port)
    with tempfile.TemporaryDirectory(prefix="conformance-") as results:
        try:
            wait_listening(port, server, timeout=60)
            argv = [node, "--import", str(POLYFILL), str(entry), "server",
                    "--url", f"http://127.0.0.1:{port}/mcp", "-o", results]  # fmt: skip
            if scenario:
                argv += ["--scenario", scenario]
            if revision != REVISIONS[0]:  # the default suite's own selection is 2025-11-25's
                argv += ["--spec-version", revision] if scenario else ["--requirements", revision]
                argv += ["--timeout", str(SCENARIO_TIMEOUT_MS)]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
        finally:
            stop_process(server)
        output = done.stdout + done.stderr
        summary = parse_results(Path(results), transport) or parse_summary(output, scenario)
    for name in not_scored(output):
        summary.pop(name, None)
    failing = {k: v for k, v in summary.items() if v[1] and k not in undeclared(revision)}
    return (1 if failing or not summary else 0), output, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--revision", choices=REVISIONS, default=REVISIONS[0])
    parser.add_argument("--scenario")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    code, output, summary = run(args.transport, args.scenario, args.revision)
    if args.verbose:
        print(output)
    skip = undeclared(args.revision)
    relevant = {k: v for k, v in summary.items() if k not in skip}
    passed = sum(1 for v in relevant.values() if not v[1])
    for name, (ok, bad) in summary.items():
        mark = "skip" if name in skip else ("ok" if not bad else "FAIL")
        print(f"{mark:4} {name}: {ok} passed, {bad} failed")
    checks = sum(v[0] for v in relevant.values())
    print(f"{args.revision} over {args.transport}: {passed}/{len(relevant)} scenarios pass, "
          f"{checks} checks pass ({len(summary) - len(relevant)} for client features, "
          "not counted)")  # fmt: skip
    return code


if __name__ == "__main__":
    sys.exit(main())
