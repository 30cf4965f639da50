"""Builds the edit corpus data files (``cases_*.json``) from realistic source files.

Each case is an edit request as a model sends it (often imprecisely) and the expected outcome.
For an ``applied`` case the expected file is computed from the *intended* exact edit (plain
string replacement of the precise text), never by the matching code under test. Run this
script to regenerate the JSON files after changing the sources below.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

PY_SERVICE = '''"""Order service."""

import logging
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass
class Order:
    id: int
    total: float
    status: str = "new"


class OrderService:
    def __init__(self, repo, mailer):
        self.repo = repo
        self.mailer = mailer

    def place(self, order: Order) -> Order:
        if order.total <= 0:
            raise ValueError("total must be positive")
        saved = self.repo.save(order)
        self.mailer.send(saved.id, "placed")
        log.info("placed order %s", saved.id)
        return saved

    def cancel(self, order_id: int) -> None:
        order = self.repo.get(order_id)
        if order is None:
            raise KeyError(order_id)
        order.status = "cancelled"
        self.repo.save(order)
        log.info("cancelled order %s", order_id)
'''

JS_APP = """import express from 'express';
import { getUser, listUsers } from './db.js';

const app = express();
const PORT = process.env.PORT || 3000;

app.get('/users', async (req, res) => {
  const users = await listUsers();
  res.json(users);
});

app.get('/users/:id', async (req, res) => {
  const user = await getUser(req.params.id);
  if (!user) {
    res.status(404).json({ error: 'not found' });
    return;
  }
  res.json(user);
});

app.listen(PORT, () => {
  console.log(`listening on ${PORT}`);
});
"""

GO_MAIN = """package main

import (
\t"fmt"
\t"os"
)

type Config struct {
\tName    string
\tVerbose bool
}

func load(path string) (*Config, error) {
\tdata, err := os.ReadFile(path)
\tif err != nil {
\t\treturn nil, fmt.Errorf("read %s: %w", path, err)
\t}
\tcfg := &Config{Name: string(data)}
\treturn cfg, nil
}

func main() {
\tcfg, err := load("app.conf")
\tif err != nil {
\t\tfmt.Println(err)
\t\tos.Exit(1)
\t}
\tfmt.Println("hello", cfg.Name)
}
"""

YAML_CI = """name: ci
on:
  push:
    branches: [main]
  pull_request:

jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - name: Set up Python
        uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - name: Install
        run: pip install -e .[dev]
      - name: Test
        run: pytest -q
"""

MD_README = """# Inventory

A small service that tracks stock levels.

## Install

    pip install inventory

## Usage

Run `inventory serve` and open the dashboard.
The dashboard shows low stock in red.

## License

MIT
"""

CS_CRLF = (
    "using System;\n\nnamespace Shop\n{\n    public class Cart\n    {\n"
    "        private decimal total;\n\n        public void Add(decimal price)\n        {\n"
    "            if (price < 0)\n            {\n"
    '                throw new ArgumentException("negative price");\n            }\n'
    "            total += price;\n        }\n\n        public decimal Total => total;\n    }\n}\n"
)

PY_STRINGS = """MESSAGES = {
    "greet": "Hello, {name}!\\n",
    "bye": 'Goodbye, {name}.',
    "path": "C:\\\\temp\\\\out.txt",
}


def render(key, **kw):
    text = MESSAGES[key]
    return text.format(**kw)


def banner():
    print("=== \\"Shop\\" ===")
"""

PY_REPEAT = """def load_users(db):
    rows = db.query("select * from users")
    return [dict(r) for r in rows]


def load_orders(db):
    rows = db.query("select * from orders")
    return [dict(r) for r in rows]


def load_items(db):
    rows = db.query("select * from items")
    return [dict(r) for r in rows]
"""

SOURCES: dict[str, tuple[str, bool]] = {
    "service.py": (PY_SERVICE, False),
    "app.js": (JS_APP, False),
    "main.go": (GO_MAIN, False),
    "ci.yml": (YAML_CI, False),
    "README.md": (MD_README, False),
    "Cart.cs": (CS_CRLF, True),
    "messages.py": (PY_STRINGS, False),
    "loaders.py": (PY_REPEAT, False),
}

# (file, exact old, exact new): the edits a model intends.
TARGETS: list[tuple[str, str, str]] = [
    ("service.py", '    status: str = "new"\n', '    status: str = "new"\n    note: str = ""\n'),
    (
        "service.py",
        '        if order.total <= 0:\n            raise ValueError("total must be positive")',
        '        if order.total <= 0:\n            log.warning("rejected order %s", order.id)\n'
        '            raise ValueError("total must be positive")',
    ),
    (
        "service.py",
        "        order = self.repo.get(order_id)\n        if order is None:\n"
        "            raise KeyError(order_id)",
        "        order = self.repo.get(order_id)\n        if order is None:\n"
        '            raise LookupError(f"no order {order_id}")',
    ),
    (
        "service.py",
        "    def __init__(self, repo, mailer):",
        "    def __init__(self, repo, mailer, clock=None):",
    ),
    (
        "app.js",
        "  if (!user) {\n    res.status(404).json({ error: 'not found' });\n    return;\n  }",
        "  if (!user) {\n    res.status(404).json({ error: 'user not found' });\n    return;\n  }",
    ),
    (
        "app.js",
        "const PORT = process.env.PORT || 3000;",
        "const PORT = Number(process.env.PORT) || 8080;",
    ),
    (
        "app.js",
        "app.listen(PORT, () => {\n  console.log(`listening on ${PORT}`);\n});",
        "app.listen(PORT, () => {\n  console.log(`users api listening on ${PORT}`);\n});",
    ),
    (
        "main.go",
        '\tif err != nil {\n\t\treturn nil, fmt.Errorf("read %s: %w", path, err)\n\t}',
        '\tif err != nil {\n\t\treturn nil, fmt.Errorf("load config %s: %w", path, err)\n\t}',
    ),
    (
        "main.go",
        "\t\tfmt.Println(err)\n\t\tos.Exit(1)",
        "\t\tfmt.Fprintln(os.Stderr, err)\n\t\tos.Exit(2)",
    ),
    (
        "main.go",
        "\tName    string\n\tVerbose bool",
        "\tName    string\n\tVerbose bool\n\tPort    int",
    ),
    (
        "ci.yml",
        '        with:\n          python-version: "3.11"',
        '        with:\n          python-version: "3.12"',
    ),
    (
        "ci.yml",
        "      - name: Test\n        run: pytest -q",
        "      - name: Test\n        run: pytest -q --maxfail=1\n"
        "      - name: Lint\n        run: ruff check",
    ),
    (
        "README.md",
        "The dashboard shows low stock in red.",
        "The dashboard shows low stock in red and\nout-of-stock items in grey.",
    ),
    ("README.md", "## License\n\nMIT", "## License\n\nApache-2.0"),
    (
        "Cart.cs",
        "            if (price < 0)\n            {\n"
        '                throw new ArgumentException("negative price");\n            }',
        "            if (price <= 0)\n            {\n"
        '                throw new ArgumentException("price must be positive");\n            }',
    ),
    (
        "Cart.cs",
        "        public decimal Total => total;",
        "        public decimal Total => Math.Round(total, 2);",
    ),
    ("messages.py", "    \"bye\": 'Goodbye, {name}.',", "    \"bye\": 'See you, {name}.',"),
    ("messages.py", '    print("=== \\"Shop\\" ===")', '    print("=== \\"Store\\" ===")'),
    ("messages.py", '    "greet": "Hello, {name}!\\n",', '    "greet": "Hi, {name}!\\n",'),
    (
        "loaders.py",
        'def load_orders(db):\n    rows = db.query("select * from orders")',
        "def load_orders(db, limit=100):\n"
        '    rows = db.query("select * from orders limit ?", limit)',
    ),
]


def _lines(text: str) -> list[str]:
    return text.split("\n")


def trailing_ws(text: str) -> str:
    return "\n".join(ln + "  " if ln.strip() else ln for ln in _lines(text))


def dedent(text: str) -> str:
    lines = _lines(text)
    indents = [len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()]
    cut = min(indents) if indents else 0
    return "\n".join(ln[cut:] for ln in lines)


def extra_indent(text: str) -> str:
    return "\n".join("  " + ln if ln.strip() else ln for ln in _lines(text))


def tabs_to_spaces(text: str) -> str:
    return "\n".join(ln.replace("\t", "    ") for ln in _lines(text))


def double_spaces(text: str) -> str:
    """A model that pads operators and commas: ``a, b`` -> ``a,  b`` (inner spaces only)."""
    out = []
    for ln in _lines(text):
        body = ln.lstrip()
        out.append(ln[: len(ln) - len(body)] + re.sub(r"(?<=\S) (?=\S)", "  ", body, count=2))
    return "\n".join(out)


def escape_quotes(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def escape_newlines(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def smart_quotes(text: str) -> str:
    text = re.sub(r"'([^'\n]*)'", "\u2018\\1\u2019", text)
    return re.sub(r'"([^"\n]*)"', "\u201c\\1\u201d", text)


def numbered(text: str, first: int) -> str:
    return "\n".join(f"{first + k:6d}\t{ln}" for k, ln in enumerate(_lines(text)))


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


PERTURBATIONS = {
    "exact": lambda o, n, f: (o, n),
    "trailing whitespace drift": lambda o, n, f: (trailing_ws(o), n),
    "indentation dropped": lambda o, n, f: (dedent(o), dedent(n)),
    "indentation added": lambda o, n, f: (extra_indent(o), extra_indent(n)),
    "tabs sent as spaces": lambda o, n, f: (tabs_to_spaces(o), tabs_to_spaces(n)),
    "inner whitespace drift": lambda o, n, f: (double_spaces(o), n),
    "over-escaped quotes": lambda o, n, f: (escape_quotes(o), escape_quotes(n)),
    "escaped newlines": lambda o, n, f: (escape_newlines(o), escape_newlines(n)),
    "typographic quotes": lambda o, n, f: (smart_quotes(o), smart_quotes(n)),
    "read line numbers kept": lambda o, n, f: (numbered(o, f), numbered(n, f)),
    "CRLF in request": lambda o, n, f: (crlf(o), crlf(n)),
}


def file_bytes(name: str) -> bytes:
    text, is_crlf = SOURCES[name]
    return (crlf(text) if is_crlf else text).encode()


def applied_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    for name, old, new in TARGETS:
        text = SOURCES[name][0]
        assert text.count(old) == 1, (name, old)
        expected = text.replace(old, new, 1)
        is_crlf = SOURCES[name][1]
        expected_bytes = crlf(expected) if is_crlf else expected
        first_line = text[: text.index(old)].count("\n") + 1
        seen: set[tuple[str, str]] = set()
        for kind, perturb in PERTURBATIONS.items():
            o, n = perturb(old, new, first_line)
            if (o, n) in seen or (kind != "exact" and (o, n) == (old, new)):
                continue
            # A request whose old_string shows no quote (or no newline) cannot reveal whether
            # the model escaped them, so those perturbations only apply where it can.
            if kind in ("typographic quotes", "over-escaped quotes") and not any(
                q in old for q in "'\""
            ):
                continue
            if kind == "escaped newlines" and "\n" not in old:
                continue
            # One line found mid-line with new lines dedented is ambiguous by design; it is
            # among the refused cases ("mid-line anchor").
            if kind == "indentation dropped" and "\n" not in old.rstrip("\n") and "\n" in new:
                continue
            if kind == "inner whitespace drift" and double_spaces(old) == old:
                continue
            seen.add((o, n))
            cases.append(
                {
                    "category": kind,
                    "file": name,
                    "old_string": o,
                    "new_string": n,
                    "expect": "applied",
                    "expected_content": expected_bytes,
                }
            )
    return cases


def refused_cases() -> list[dict[str, Any]]:
    c: list[dict[str, Any]] = []

    def add(category: str, file: str, old: str, new: str, needle: str, **extra: Any) -> None:
        c.append({"category": category, "file": file, "old_string": old, "new_string": new,
                  "expect": "refused", "error_contains": needle, **extra})  # fmt: skip

    ambiguous = [
        ("loaders.py", "    return [dict(r) for r in rows]", "    return list(rows)"),
        ("loaders.py", "    rows = db.query(", "    rows = db.execute("),
        ("loaders.py", "return [dict(r) for r in rows]\n", "return rows\n"),
        ("service.py", "self.repo.save(", "self.repo.persist("),
        ("service.py", "log.info(", "log.debug("),
        ("app.js", "  res.json(user", "  res.send(user"),
        ("app.js", "async (req, res) => {", "(req, res) => {"),
        ("main.go", "\tif err != nil {", "\tif err != nil && !ok {"),
        ("main.go", "    if err != nil {", "    if err == nil {"),
        ("ci.yml", "      - name:", "      - id:"),
        ("Cart.cs", "        }", "        };"),
        ("README.md", "## ", "### "),
        ("messages.py", "{name}", "{user}"),
        ("loaders.py", "def load_", "async def load_"),
        ("loaders.py", '  rows = db.query("select * from', '  rows = db.fetch("select * from'),
    ]
    for file, old, new in ambiguous:
        add("ambiguous anchor", file, old, new, "places")
    hallucinated = [
        (
            "service.py",
            "    def refund(self, order_id: int) -> None:",
            "    def refund(self, oid):",
        ),
        ("service.py", "        if order.total < 0:\n            raise ValueError", "x"),
        ("service.py", '        self.mailer.send(saved.id, "created")', "        pass"),
        ("app.js", "app.get('/orders', async (req, res) => {", "app.get('/orders', h);"),
        ("app.js", "  const user = await getUser(req.params.userId);", "  const u = 1;"),
        ("main.go", "\treturn cfg, err", "\treturn cfg, nil"),
        ("main.go", "func load(path string) (Config, error) {", "func load() {"),
        ("ci.yml", '          python-version: "3.10"', '          python-version: "3.12"'),
        ("ci.yml", "        run: pip install .[test]", "        run: pip install ."),
        ("README.md", "Run `inventory start` and open the dashboard.", "Run it."),
        ("Cart.cs", "        private int total;", "        private long total;"),
        ("messages.py", '    "bye": "Goodbye, {name}.",', "x"),
        ("loaders.py", "def load_products(db):", "def load_products(db, n):"),
        ("loaders.py", '    rows = db.query("select * from users where active")', "x"),
    ]
    for file, old, new in hallucinated:
        add("text not in file", file, old, new, "not found")
    nesting = [
        (
            "service.py",
            'if order is None:\nraise KeyError(order_id)\n    order.status = "cancelled"',
            "if order is None:\n    raise KeyError(order_id)",
        ),
        (
            "app.js",
            "if (!user) {\nres.status(404).json({ error: 'not found' });\n  return;\n}",
            "x",
        ),
        ("main.go", "if err != nil {\n    fmt.Println(err)\nos.Exit(1)\n}", "x"),
        ("Cart.cs", 'if (price < 0)\n    {\nthrow new ArgumentException("negative price");', "x"),
        ("ci.yml", "- name: Install\nrun: pip install -e .[dev]", "x"),
    ]
    for file, old, new in nesting:
        add("wrong relative indentation", file, old, new, "not found")
    stale = [
        (
            "service.py",
            '        log.info("placed order %s", saved.id)',
            '        log.info("ok")',
            ("return saved", "return saved  # checked"),
        ),
        (
            "app.js",
            "const PORT = process.env.PORT || 3000;",
            "const PORT = 1;",
            ("listUsers();", "listUsers({ limit: 50 });"),
        ),
        (
            "main.go",
            '\tfmt.Println("hello", cfg.Name)',
            "\tfmt.Println(cfg.Name)",
            ("package main", "package main // app"),
        ),
        ("ci.yml", "        run: pytest -q", "        run: pytest", ("name: ci", "name: tests")),
        ("README.md", "MIT", "BSD", ("# Inventory", "# Inventory service")),
        (
            "Cart.cs",
            "            total += price;",
            "            total = total + price;",
            ("using System;", "using System.Linq;"),
        ),
    ]
    for file, old, new, change in stale:
        add(
            "stale file", file, old, new, "re-read first", read_first=True, disk_change=list(change)
        )
    add("no-op edit", "service.py", "        return saved", "        return saved", "identical")
    add("no-op edit", "app.js", "  res.json(users);", "  res.json(users);", "identical")
    add("empty anchor", "main.go", "", "package other\n", "empty")
    add("replace_all of absent text", "ci.yml", "windows-latest", "macos-latest", "not found",
        replace_all=True)  # fmt: skip
    add("replace_all of absent text", "loaders.py", "db.fetch(", "db.query(", "not found",
        replace_all=True)  # fmt: skip
    add("re-indent impossible", "service.py",
        "            order.status = \"cancelled\"\n            self.repo.save(order)",
        "            order.status = \"cancelled\"\ncleanup()", "indented less")  # fmt: skip
    add("mid-line anchor, new lines dedented", "service.py", "status: str = \"new\"\n",
        "status: str = \"new\"\nnote: str = \"\"\n", "whole lines")  # fmt: skip
    add("mid-line anchor, new lines dedented", "loaders.py", "return [dict(r) for r in rows]",
        "return [dict(r) for r in rows]\n\ndef load_all(db):", "whole lines",
        replace_all=True)  # fmt: skip
    return c


def replace_all_cases() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    specs = [
        ("loaders.py", "db.query(", "db.fetch("),
        ("loaders.py", "rows", "records"),
        ("service.py", "log.info", "log.debug"),
        ("app.js", "res.json(", "res.status(200).json("),
        ("main.go", "fmt.", "fmt." + ""),
        ("messages.py", "{name}", "{name}{name}"),
        ("README.md", "dashboard", "web dashboard"),
        ("Cart.cs", "total", "sum"),
    ]
    for file, old, new in specs:
        if old == new:
            continue
        text, is_crlf = SOURCES[file]
        expected = text.replace(old, new)
        out.append({"category": "replace_all (new contains old)" if old in new else "replace_all",
                    "file": file, "old_string": old, "new_string": new, "replace_all": True,
                    "expect": "applied",
                    "expected_content": crlf(expected) if is_crlf else expected})  # fmt: skip
    return out


MAKEFILE = "build:\n\tgo build ./...\n\ntest:\n\tgo test ./...\n"
PKG_JSON = (
    '{\n  "name": "web",\n  "scripts": {\n    "test": "vitest run",\n'
    '    "lint": "eslint ."\n  }\n}\n'
)
FLASK = (
    "from flask import Flask\n\napp = Flask(__name__)\n\n\n"
    '@app.route("/")\ndef index():\n    return "ok"\n'
)
NO_EOL = "[server]\nport = 8080\nhost = localhost"
COUNTER = "count = 0\nfor x in items:\n    count += x\nprint(count)\n"


def handwritten_cases() -> list[dict[str, Any]]:
    """Cases written out in full: content, request and the expected file, independent of the
    generator's perturbations."""

    def case(cat: str, name: str, content: str, old: str, new: str, **rest: Any) -> dict[str, Any]:
        return {"category": cat, "file": name, "content": content, "old_string": old,
                "new_string": new, **rest}  # fmt: skip

    def applied(*args: str, **extra: Any) -> dict[str, Any]:
        *head, expected = args
        return case(*head, expect="applied", expected_content=expected, **extra)

    def refused(*args: str, **extra: Any) -> dict[str, Any]:
        *head, needle = args
        return case(*head, expect="refused", error_contains=needle, **extra)

    return [
        applied(
            "tabs sent as spaces",
            "Makefile",
            MAKEFILE,
            "test:\n    go test ./...",
            "test:\n    go test -race ./...",
            "build:\n\tgo build ./...\n\ntest:\n\tgo test -race ./...\n",
        ),
        applied(
            "escaped newlines",
            "Makefile",
            MAKEFILE,
            "build:\\n\\tgo build ./...",
            "build:\\n\\tgo vet ./...\\n\\tgo build ./...",
            "build:\n\tgo vet ./...\n\tgo build ./...\n\ntest:\n\tgo test ./...\n",
        ),
        applied(
            "exact",
            "package.json",
            PKG_JSON,
            '"lint": "eslint ."',
            '"lint": "eslint . --max-warnings 0"',
            PKG_JSON.replace('"eslint ."', '"eslint . --max-warnings 0"'),
        ),
        applied(
            "over-escaped quotes",
            "package.json",
            PKG_JSON,
            '    \\"test\\": \\"vitest run\\",',
            '    \\"test\\": \\"vitest run --coverage\\",',
            PKG_JSON.replace("vitest run", "vitest run --coverage"),
        ),
        refused(
            "flattened indentation",
            "app.py",
            FLASK,
            '@app.route("/")\ndef index():\nreturn "ok"',
            '@app.route("/")\ndef index():\nreturn "hello"',
            "not found",
        ),
        applied(
            "indentation added",
            "app.py",
            FLASK,
            '    def index():\n        return "ok"',
            '    def index():\n        return "hi"',
            FLASK.replace('return "ok"', 'return "hi"'),
        ),
        refused(
            "wrong relative indentation",
            "app.py",
            FLASK,
            'def index():\nreturn "ok"',
            'def index():\n    return "hello"',
            "not found",
        ),
        applied(
            "CRLF in request",
            "app.ini",
            NO_EOL.replace("\n", "\r\n"),
            "port = 8080\r\nhost = localhost",
            "port = 9090\r\nhost = 0.0.0.0",
            "[server]\r\nport = 9090\r\nhost = 0.0.0.0",
        ),
        applied(
            "trailing whitespace drift",
            "app.ini",
            NO_EOL,
            "host = localhost  \n",
            "host = example.org\n",
            "[server]\nport = 8080\nhost = example.org",
        ),
        applied(
            "replace_all (new contains old)",
            "count.py",
            COUNTER,
            "count",
            "count_total",
            COUNTER.replace("count", "count_total"),
            replace_all=True,
        ),
        refused("ambiguous anchor", "count.py", COUNTER, "count", "total", "places"),
        refused(
            "read line numbers kept",
            "count.py",
            COUNTER,
            "     2\tfor x in items:\n    count += x",
            "x",
            "not found",
        ),
        refused("empty file", "empty.py", "", "import os", "import sys", "not found"),
        refused("text not in file", "app.py", FLASK, '@app.route("/health")', "x", "not found"),
        applied(
            "typographic quotes",
            "app.py",
            FLASK,
            "@app.route(\u201c/\u201d)\ndef index():",
            "@app.route(\u201c/home\u201d)\ndef index():",
            FLASK.replace('@app.route("/")', '@app.route("/home")'),
        ),
    ]


def main() -> None:
    groups = {
        "cases_handwritten.json": handwritten_cases(),
        "cases_drift.json": applied_cases(),
        "cases_refused.json": refused_cases(),
        "cases_replace_all.json": replace_all_cases(),
    }
    sources = {name: file_bytes(name).decode() for name in SOURCES}
    (HERE / "sources.json").write_text(json.dumps(sources, indent=1, ensure_ascii=False) + "\n")
    for filename, cases in groups.items():
        for k, case in enumerate(cases, 1):
            case["id"] = f"{filename.removesuffix('.json').removeprefix('cases_')}-{k:03d}"
        (HERE / filename).write_text(json.dumps(cases, indent=1, ensure_ascii=False) + "\n")
    total = sum(len(v) for v in groups.values())
    print(f"wrote {total} cases")


if __name__ == "__main__":
    main()
