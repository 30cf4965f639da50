"""What a secret looks like: the built-in value patterns and the names of arguments that hold
secrets.

Every built-in pattern is linear in its input: no unbounded repeat sits inside another repeat (a
structural test walks each pattern), and every look-ahead or look-behind is bounded. Each
pattern names literal *anchors*, one of which every match contains, so :class:`Redactor
<toolcards.governance.redaction.redactor.Redactor>` runs only the patterns whose anchors
occur. A built-in pattern is compiled the first time it is searched (most processes never
search most of them).

A policy's own patterns are not ours to check: they run on the ``regex`` package, which releases
the interpreter lock while matching and stops a match at :func:`match_timeout` (on ``re``,
``TCK-(\\w+-?)+:`` held every thread of the process 6 s on a 31-character argument, twice as
long for each character more). All of a policy's patterns share one :func:`match_deadline` a
text, and :func:`check_policy_pattern` refuses at load a pattern ``regex`` would take long to
compile (it writes counted repeats out: ``(?:a{10000}){1000}`` took 10.9 s and 2.6 GB).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import regex

    _Compiled = re.Pattern[str] | regex.Pattern[str]
    _Match = re.Match[str] | regex.Match[str]

REDACTED = "[REDACTED]"

# Argument names that always hold secrets (matched as substrings of the lower-cased name), and
# the short ones that count only as a word of their own (``db_pass``, ``X-Auth``, ``dbPwd``,
# ``card_pin``; not ``passport``, ``author``, ``spinner``) or an environment name ending in
# ``_KEY``.
_SECRET_NAMES = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "api_key",
    "apikey",
    "access_key",
    "private_key",
    "credential",
    "authorization",
    "cookie",
    "session_id",
)
SECRET_NAME = re.compile(
    "|".join(_SECRET_NAMES)
    + r"|(?<![a-z0-9])(?:pass|pwd|auth|pin)(?![a-z0-9])"
    + r"|(?<=[a-z0-9])(?-i:Pass|Pwd|Auth|Pin)(?-i:(?![a-z]))"
    + r"|(?-i:^[A-Z][A-Z0-9_]*_KEY$)",
    re.IGNORECASE,
)

# Keys whose value is a secret in free text (``key=value`` / ``key: value``): the key must END
# with one of these words, so ``max_tokens=5`` or ``password_hint=...`` stay readable; ``pass``,
# ``pwd`` and ``auth`` must start a word (``DB_PASS``, not ``bypass``); ``..._KEY`` in capitals
# (``STRIPE_KEY``, not ``sort_key``).
_SECRET_KEYS = (
    r"pass(?:word|wd|phrase)|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key"
    r"|private[_-]?key|credentials?|authorization|cookie|session[_-]?(?:id|key)"
    r"|signature|account[_-]?key|sig"
    r"|(?<![a-z0-9])(?:pass|pwd|auth|pin)"
    r"|(?-i:(?<![A-Za-z0-9])[A-Z][A-Z0-9]{0,40}_KEY)"
)
_KEY_ANCHORS = ("pass", "secret", "token", "key", "credential", "auth", "cookie", "session")
_KEY_ANCHORS_ALL = (*_KEY_ANCHORS, "sig", "pwd", "pin")
# words after "password:" that are a type, an empty value or a validation message, not the
# secret (code, YAML, "password: Field required")
_NOT_A_VALUE = (
    r"(?!(?:str|bytes|int|bool|none|null|optional|required|secretstr|true|false|field|input"
    r"|string|value|list|dict|object|array|number|integer)\b)"
)
# words after "the password is" that describe it instead of being it
_DESCRIBES = (
    r"(?!(?:required|too|not|incorrect|invalid|wrong|missing|empty|expired|stored|set|being"
    r"|a|an|the|now|still|also|hashed|changed|reset|correct|case|never|only|at|in|on|used"
    r"|valid|weak|strong|optional|shown|hidden|saved|sent|encrypted|masked)\b)"
)
_FLAG_KEYS = (
    r"password|passwd|passphrase|pass|pwd|token|secret|api-?key|access-?key|private-?key"
    r"|credentials?|auth"
)


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """One value pattern. ``anchors`` are lower-case substrings of which every match contains
    at least one (empty: always searched). A named group ``secret`` limits the replacement to
    that group (the key of a ``key=value`` pair stays readable)."""

    name: str
    source: _Compiled | str
    """The regex (a policy's: a ``regex`` pattern), or its text (compiled on first use:
    :attr:`regex`)."""
    anchors: tuple[str, ...] = ()

    @classmethod
    def compile(cls, name: str, pattern: str, anchors: Iterable[str] = ()) -> SecretPattern:
        """Compiled now, on ``regex``: a bad regex, or one :func:`check_policy_pattern`
        refuses, fails here (patterns given in a policy), a ValueError."""
        import regex  # lazy: regex, ~2x python -c pass; only a policy's patterns need it

        check_policy_pattern(name, pattern)
        try:
            compiled = regex.compile(pattern)
        except regex.error as exc:
            raise ValueError(f"invalid pattern {name!r}: {exc}") from None
        return cls(name, compiled, tuple(a.lower() for a in anchors))

    @classmethod
    def lazy(cls, name: str, pattern: str, anchors: Iterable[str] = ()) -> SecretPattern:
        """Compiled on first use (the built-in patterns, which a test compiles)."""
        return cls(name, pattern, tuple(a.lower() for a in anchors))

    @property
    def regex(self) -> _Compiled:
        source = self.source
        return _compiled(source) if isinstance(source, str) else source

    def search(self, text: str, deadline: float | None = None) -> bool:
        """Whether the pattern occurs in ``text``; TimeoutError past ``deadline`` (a policy's
        pattern; default: :func:`match_deadline` of ``text``)."""
        compiled = self.regex
        if isinstance(compiled, re.Pattern):
            return compiled.search(text) is not None
        left = _left(text, deadline)
        return compiled.search(text, concurrent=True, timeout=left) is not None

    def sub(self, text: str, deadline: float | None = None) -> str:
        """``text`` with each match replaced; TimeoutError as :meth:`search` says."""
        compiled = self.regex
        repl = _keep_key if "secret" in compiled.groupindex else REDACTED
        if isinstance(compiled, re.Pattern):
            return compiled.sub(repl, text)
        return compiled.sub(repl, text, concurrent=True, timeout=_left(text, deadline))


MATCH_TIMEOUT_S = 0.05
"""CPU seconds one search or replacement of a policy's pattern may take on short text."""
MATCH_TIMEOUT_PER_CHAR_S = 1e-6
"""And for each character of the text: a linear pattern replaces about 25 characters a
microsecond, so a result of megabytes is redacted, not withheld."""


def match_timeout(text: str) -> float:
    """CPU seconds a policy's pattern may take on ``text``; past them the text is taken to hold
    a secret (:class:`~toolcards.governance.redaction.redactor.Redactor` withholds it whole)."""
    return MATCH_TIMEOUT_S + len(text) * MATCH_TIMEOUT_PER_CHAR_S


def match_deadline(text: str) -> float:
    """The :func:`time.process_time` by which all of a policy's patterns must be done with
    ``text`` (``regex`` counts process CPU time): one bound a text, shared, so a policy of
    many patterns gets no more time (1,000 copies of ``(a|aa)+$``, each just under its own
    bound, held one call 14-28 s)."""
    return time.process_time() + match_timeout(text)


def _left(text: str, deadline: float | None) -> float:
    """The CPU seconds left before ``deadline``; TimeoutError when none are."""
    left = match_timeout(text) if deadline is None else deadline - time.process_time()
    if left <= 0:
        raise TimeoutError("the text's redaction deadline has passed")
    return left


MAX_PATTERN_CHARS = 1_000
"""How long a policy's pattern may be."""
MAX_EXPANDED = 10_000
"""How many items a policy's pattern may hold once its counted repeats are written out, as
``regex`` writes them when it compiles (``[ab]{10000}``: 14 ms, 4 MB)."""
MAX_NESTING = 50
"""How deep a policy's pattern may nest groups (``regex`` compiles recursively)."""
_COUNT = re.compile(r"\{([0-9\s]*)(?:,([0-9\s]*))?\}")
_CLASS = re.compile(r"\[\^?\]?(?:\\.|[^\]\\])*\]?", re.DOTALL)
_SKIPPED = re.compile(r"\((?:\?#(?:\\.|[^)\\])*\)?|\?[\w^-]*\))", re.DOTALL)
"""A ``(?#comment)``, or a group of inline flags (or a recursion, ``(?R)``, ``(?1)``) that a
quantifier after it reaches past: ``(?:a{1000})(?x){1000}`` repeats the group."""
_VERBOSE = re.compile(r"\(\?[\w^-]*x")
_KIND = re.compile(r"\?(?:[:=!>|]|<[=!]|P?<\w+>|'\w+'|[\w^-]+:)")
"""What says a group's kind after its ``(``: ``?:``, ``?P<name>``, ``?i:``."""


def check_policy_pattern(name: str, pattern: str) -> None:
    """Refuse, a ValueError, a pattern ``regex`` may not compile in bounded time and memory:
    longer than :data:`MAX_PATTERN_CHARS`, nesting groups past :data:`MAX_NESTING`, or holding
    more than :data:`MAX_EXPANDED` items once its counted repeats are written out."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern {name!r} is longer than {MAX_PATTERN_CHARS:,} characters")
    if _expanded(name, pattern) > MAX_EXPANDED:
        raise ValueError(
            f"pattern {name!r} holds more than {MAX_EXPANDED:,} items once its counted "
            "repeats are written out"
        )


def _expanded(name: str, pattern: str) -> int:
    """How many items ``pattern`` holds once each counted repeat is written out (``{n,m}``: m
    times), erring high: whitespace, comments and inline flags are no item (a quantifier after
    them repeats the item before, as in verbose mode), a class ends at its first ``]``. A
    ``#`` comment of verbose mode may hide a parenthesis: refused."""
    verbose = _VERBOSE.search(pattern) is not None
    groups = [0]  # the size of each open group so far
    last = 0  # the size of the item a quantifier repeats
    at = 0
    while at < len(pattern):
        char = pattern[at]
        skipped = _SKIPPED.match(pattern, at) if char == "(" else None
        count = _COUNT.match(pattern, at) if char == "{" else None
        if char.isspace() or char in "*+?|" or skipped is not None:
            at = at + 1 if skipped is None else skipped.end()
        elif count is not None:  # the item written out n (m) times
            times = max(int("".join(n.split()) or 0) for n in count.groups(""))
            times = min(max(times, 1), MAX_EXPANDED + 1)
            groups[-1] += last * (times - 1)
            last = min(last * times, MAX_EXPANDED + 1)
            at = count.end()
        elif char == "(":
            groups.append(0)
            if len(groups) > MAX_NESTING:
                raise ValueError(f"pattern {name!r} nests groups more than {MAX_NESTING} deep")
            kind = _KIND.match(pattern, at + 1)
            at = at + 1 if kind is None else kind.end()
        elif char == "#" and verbose:
            raise ValueError(f"pattern {name!r} has a # comment in verbose mode (write \\#)")
        else:  # an item: a group closed, a class, an escape, a character
            last = max(groups.pop(), 1) if char == ")" and len(groups) > 1 else 1
            groups[-1] += last
            found = _CLASS.match(pattern, at) if char == "[" else None
            at = found.end() if found is not None else at + (2 if char == "\\" else 1)
    return sum(groups)


def _keep_key(match: _Match) -> str:
    """The match with only its ``secret`` group replaced (the key stays readable)."""
    start, end = match.span("secret")
    whole = match.group(0)
    offset = match.start()
    return whole[: start - offset] + REDACTED + whole[end - offset :]


@functools.cache
def _compiled(source: str) -> re.Pattern[str]:
    return re.compile(source)


_P = SecretPattern.lazy
BUILTIN_PATTERNS: tuple[SecretPattern, ...] = (
    _P(
        "private_key",
        r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)",
        ["-----begin"],
    ),
    _P(
        "secret_assignment",
        # key, its closing quote (escaped in JSON inside a string), ``=``/``:``/``:=``/``=>``
        # or ``:`` and the value indented on the next line (YAML, also ``|`` and ``>``; the line
        # break may be an escaped ``\\n``)
        rf"(?i)(?:{_SECRET_KEYS})(?:\\{{0,3}}[\"'])?[ \t]*"
        r"(?::[ \t]*[|>]?[-+]?[ \t]*(?:\r?\n|(?:\\r)?\\n)[ \t]+|[:=]{1,2}>?[ \t]*)"
        r"(?:(?:basic|bearer|token|digest)[ \t]+)?"
        + _NOT_A_VALUE
        # a list after the key is the secret whole (``"password": ["a", "b"]``, over lines
        # too), up to its first ``]`` or 1,024 characters
        + r"(?P<secret>\[[^\]]{0,1024}\]?|\\{1,8}\"[^\"\n]*\"|\"[^\"\n]*\"|'[^'\n]*'"
        r"|[\"']?[^\s\"',;&]+)",
        _KEY_ANCHORS_ALL,
    ),
    _P(
        "secret_flag",
        rf"(?i)(?<![^\s\"'])--?(?:[a-z0-9-]{{0,40}}-)?(?:{_FLAG_KEYS})[ \t]+"
        r"(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'-][^\s\"']*)",
        ["pass", "pwd", "token", "secret", "key", "credential", "auth"],
    ),
    _P(
        "secret_phrase",
        r"(?i)\b(?:password|passwd|passphrase|passcode|pwd|pin|secret|token|api[ _-]?key)"
        r"(?:[ \t]{1,4}(?:for|of|to|on)(?:[ \t]{1,4}[^\s]{1,40}){1,3}?)?"
        r"[ \t]{1,4}(?:is|was|equals)[ \t]{1,4}"
        + _DESCRIBES
        + r"(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;]+)",
        ["pass", "pwd", "pin", "secret", "token", "key"],
    ),
    _P(
        "secret_element",
        r"(?i)<(?:[a-z0-9_:.-]{0,40}?(?:password|passwd|passphrase|secret|token|api[_-]?key"
        r"|credentials?|private[_-]?key|access[_-]?key)|(?:[a-z0-9_:.-]{0,40}[_:.-])?"
        r"(?:pass|pwd|auth))>(?P<secret>[^<]{1,512})<",
        ["pass", "pwd", "secret", "token", "key", "credential", "auth"],
    ),
    _P(
        "netrc",
        r"(?i)\blogin\s{1,16}[^\s]{1,256}\s{1,16}password\s{1,16}(?P<secret>[^\s]+)",
        ["login"],
    ),
    _P(
        "cli_password",
        # mysql -pSECRET (the value sticks to -p; "-p" alone prompts)
        r"(?i:\b(?:mysql(?:dump|admin|sh|import|check|binlog)?|mariadb(?:-dump|-admin)?)\b)"
        r"[^\n]{0,256}?[ \t]-p(?P<secret>[^\s-][^\s]*)",
        ["mysql", "mariadb"],
    ),
    _P(
        "cli_login_password",
        # sshpass -p SECRET, docker/podman/helm login -p SECRET
        r"(?i:\b(?:sshpass|(?:docker|podman|buildah|helm|skopeo|nerdctl)[ \t]{1,8}"
        r"(?:registry[ \t]{1,8})?login)\b)[^\n]{0,256}?[ \t]-p[ \t]*(?P<secret>[^\s-][^\s]*)",
        ["sshpass", "login"],
    ),
    _P(
        "user_password_flag",
        # curl -u user:SECRET, --user user:SECRET, --proxy-user user:SECRET
        r"(?<![^\s\"'])(?:-u|-U|--user|--proxy-user)[ \t]*=?[ \t]*[\"']?"
        r"[^\s:\"'@/]{1,256}:(?P<secret>[^\s\"']+)",
        ["-u"],
    ),
    _P("bearer", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}", ["bearer"]),
    _P("url_credentials", r"(?<=://)[^/\s:@]*:[^/\s@]+(?=@)", ["://"]),
    _P("url_token", r"(?<=://)[A-Za-z0-9_.~%+-]{20,256}(?=@)", ["://"]),
    _P(
        "aws_access_key_id",
        r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[A-Z0-9]{16}\b",
        ["akia", "asia", "abia", "acca", "agpa", "aida", "aipa", "anpa", "anva", "apka", "aroa"],
    ),
    _P(
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{22,255})",
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    ),
    _P("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}", ["glpat-"]),
    _P("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", ["xox"]),
    _P("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+", ["hooks.slack"]),
    _P("openai_key", r"\bsk-[A-Za-z0-9_-]{16,}", ["sk-"]),
    _P("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", ["_live_", "_test_"]),
    _P("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", ["aiza"]),
    _P("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*", ["eyj"]),
    _P("npm_token", r"\bnpm_[A-Za-z0-9]{36}\b", ["npm_"]),
    _P("pypi_token", r"\bpypi-[A-Za-z0-9_-]{50,}", ["pypi-"]),
    _P("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}", ["hf_"]),
    _P("sendgrid_key", r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}", ["sg."]),
)
BUILTIN_NAMES = frozenset(p.name for p in BUILTIN_PATTERNS)
