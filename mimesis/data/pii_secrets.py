"""Find credentials in text: detect-secrets' maintained patterns, plus ours for what they miss.

From ``detect-secrets`` (Yelp, 1.5.0) we take the regexes (``denylist``) of its token plugins
(AWS, GitHub, GitLab, JWT, Slack, Stripe, OpenAI, SendGrid, Twilio, npm, PyPI, Discord, Telegram,
Mailchimp, Square, Azure) and apply them to free text. Its keyword and entropy plugins are built
for source files, and its IBM / SoftLayer / Cloudant keyword rules cost half of the scrub's time
on chat text for services that our assignment rule covers, so these are not used. Its OpenAI rule needs the
``T3BlbkFJ`` marker that newer keys lack, its Slack rule wants lowercase tokens and its GitHub rule
exact lengths, so ours add: ``sk-`` / ``sk-proj-`` / ``sk-ant-`` keys, Google ``AIza`` keys,
``xox?-`` Slack tokens, ``github_pat_`` / ``gh?_`` tokens, Hugging Face ``hf_`` tokens, Stripe
keys, ``Bearer`` tokens, PEM private-key blocks, and ``whsec_`` / ``xapp-`` / ``GOCSPX-`` / ``ya29.`` / ``glpat-`` / ``npm_`` tokens, and assigned values
(the value only is replaced; never a template such as ``YOUR_API_KEY``, ``${TOKEN}``,
``<password>``, ``changeme``, nor code such as ``os.environ[...]``, ``request.form.get(...)``):

- ``<name with key/secret/token> = <value>`` in code, ``.env``, YAML, JSON, INI, XML, CLI flags
  (``--api-key X``) and prose ("my api key is X"): 24+ characters mixing letters and digits, or
  12-23 that look random (short letter runs);
- ``<name with password/passwd/pwd/passphrase> = <value>`` in the same places and connection
  strings (``Password=...;``), plus ``mysql -pVALUE``, ``sshpass -p VALUE``, ``curl -u user:VALUE``
  and ``Authorization: Basic ...``: 6+ characters with a digit or symbol (any 4+ when quoted),
  since passwords are short and often plain words with a digit.

A span found by a library pattern is extended to the end of its token, because some patterns are
lazy (detect-secrets' JWT rule stops before the signature).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from detect_secrets.plugins import (
    aws,
    azure_storage_key,
    discord,
    github_token,
    gitlab_token,
    jwt,
    mailchimp,
    npm,
    openai,
    pypi_token,
    sendgrid,
    slack,
    square_oauth,
    stripe,
    telegram_token,
    twilio,
)

Span = tuple[int, int]
_PLUGINS = (
    aws.AWSKeyDetector,
    azure_storage_key.AzureStorageKeyDetector,
    discord.DiscordBotTokenDetector,
    github_token.GitHubTokenDetector,
    gitlab_token.GitLabTokenDetector,
    jwt.JwtTokenDetector,
    mailchimp.MailchimpDetector,
    npm.NpmDetector,
    openai.OpenAIDetector,
    pypi_token.PypiTokenDetector,
    sendgrid.SendGridDetector,
    slack.SlackDetector,
    square_oauth.SquareOAuthDetector,
    stripe.StripeDetector,
    telegram_token.TelegramBotTokenDetector,
    twilio.TwilioKeyDetector,
)
LIBRARY_PATTERNS: tuple[re.Pattern, ...] = tuple(r for p in _PLUGINS for r in p().denylist)
_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.]*")
# Every pattern below needs a run of 20+ token characters, so text without one is skipped (most
# chat turns): a cheap scan instead of ~25 pattern scans.
_LONG_RUN = re.compile(r"[A-Za-z0-9_\-+/=.]{20}")
_TEMPLATE = re.compile(r"^(?:[{$<\[%]|(?i:your|xxx|\*\*\*|example|placeholder|changeme|dummy))")

_PEM = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]{0,12000}?"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_OURS = re.compile(
    r"(?<![\w-])(?:"
    r"sk-(?:proj-|svcacct-|admin-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,}"
    r"|AIza[0-9A-Za-z_-]{30,}"
    r"|xox[abposre]-[A-Za-z0-9-]{15,}"
    r"|github_pat_[A-Za-z0-9_]{22,}|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|hf_[A-Za-z0-9]{30,}"
    r"|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}|whsec_[0-9A-Za-z]{24,}"
    r"|xapp-\d-[A-Za-z0-9-]{20,}|xox[abposre]\.xox[a-z]-[A-Za-z0-9-]{15,}"
    r"|GOCSPX-[A-Za-z0-9_-]{20,}|ya29\.[A-Za-z0-9_-]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36}"
    r")"
)
_KEYWORDS = ("key", "secret", "token", "passw", "pwd", "pass", "credential", "-p", "-u", "basic")
_BEARER = re.compile(r"(?i:\bbearer)\s+(?P<pii>[A-Za-z0-9_\-.=+/~]{20,})")
_KEY_NAME = (
    r"api[_-]?key|apikey|secret|token|access[_-]?key|private[_-]?key|auth[_-]?key|credentials?"
)
_PASS_NAME = r"passw(?:or)?d|passwd|passphrase|pwd|(?<![A-Za-z])pass(?![A-Za-z])|(?<![A-Za-z])pw"
# name, optional suffix and closing quote / bracket, then a separator: = : => := or prose "is"
_ASSIGNMENT = re.compile(
    rf"(?i:(?P<name>{_KEY_NAME}|{_PASS_NAME}))[A-Za-z0-9_.-]*[\"']?\]?"
    r"(?:\s*(?:=>|:=|==|[:=])\s*|\s+(?i:is|was|to)\s+(?:(?i:now|set to|still)\s+)?|>|\s+)"
    r"(?P<q>[\"'`]?)(?P<pii>[^\s\"'`,;()\[\]{}<>]{4,})(?P<after>.?)"
)
_CLI_PASSWORD = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]*?\s-p(?P<q>[\"']?)(?P<pii>[^\s\"']{4,})"
    r"|\bsshpass\s+-p\s*(?P<q2>[\"']?)(?P<pii2>[^\s\"']{4,})"
    r"|\s(?:-u|--user)\s+[\"']?[^\s:\"'$]+:(?P<pii3>[^\s\"'@]{4,})"
    r"|(?i:\bbasic)\s+(?P<pii4>[A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])"
)
_CODE_VALUE = re.compile(
    r"^(?:[A-Za-z_]\w*(?:\.\w+)+|[a-z_]+|[A-Z_]+|[a-z]+(?:[A-Z][a-z]*)+"
    r"|(?i:true|false|none|null|nil|undefined|str|string|text|int|required|optional|secret"
    r"|password|token|hidden|masked|redacted|empty|default))$"
)
_MASKED = re.compile(r"^[*x•.#-]+$", re.IGNORECASE)


def _mixed(value: str) -> bool:
    """A random-looking value: letters and digits mixed (identifiers and prose rarely are)."""
    digits = sum(c.isdigit() for c in value)
    upper = sum(c.isupper() for c in value)
    lower = sum(c.islower() for c in value)
    return (digits >= 2 and upper + lower >= 4) or (digits >= 1 and upper >= 2 and lower >= 2)


def _sk_key(value: str) -> bool:
    """``sk-`` keys are random base62: a digit and an uppercase letter (``sk-learn-...`` is not)."""
    return any(c.isdigit() for c in value) and any(c.isupper() for c in value)


def _extend(text: str, start: int, end: int) -> Span:
    end = _TOKEN_CHARS.match(text, end).end()
    while end > start and text[end - 1] in ".=-":
        end -= 1
    return start, end


def find_secrets(text: str) -> Iterator[Span]:
    """Yield ``(start, end)`` character spans of credentials in ``text`` (may overlap)."""
    if not _LONG_RUN.search(text):
        lower = text.lower()
        if any(k in lower for k in _KEYWORDS):  # passwords are short
            yield from _assignments(text)
        return
    for m in _PEM.finditer(text):
        yield m.span()
    for pattern in LIBRARY_PATTERNS:
        for m in pattern.finditer(text):
            group = 1 if pattern.groups and m.group(1) else 0
            yield _extend(text, *m.span(group))
    for m in _OURS.finditer(text):
        if not m[0].startswith("sk-") or _sk_key(m[0]):
            yield _extend(text, *m.span())
    lower = text.lower()
    if "bearer" in lower:
        yield from _group_spans(_BEARER, text, _mixed)
    if any(k in lower for k in _KEYWORDS):
        yield from _assignments(text)


def _assignments(text: str) -> Iterator[Span]:
    """Values assigned to key / secret / token / password names (rules in the docstring)."""
    for m in _ASSIGNMENT.finditer(text):
        value, quoted = m["pii"].rstrip("."), bool(m["q"])
        if quoted and not text.startswith(m["q"], m.end("pii")):
            continue  # "Enter your password" in quotes: the quoted text goes on
        if not quoted and m["after"] in "([." and m["after"]:
            continue  # a call or an attribute: sha256(x), os.environ[...]
        password = re.fullmatch(_PASS_NAME, m["name"], re.IGNORECASE) is not None
        if _password(value, quoted) if password else _assigned_secret(value):
            yield m.start("pii"), m.start("pii") + len(value)
    for m in _CLI_PASSWORD.finditer(text):
        group = next(g for g in ("pii", "pii2", "pii3", "pii4") if m[g])
        value = m[group]
        if group == "pii4" and not _mixed(value):
            continue
        if group == "pii4" or _password(value, True):
            yield m.span(group)


def _password(value: str, quoted: bool) -> bool:
    """A password: not a template or masked; unquoted, 6+ characters with a digit or symbol and
    not an identifier or a word."""
    if _TEMPLATE.search(value) or _MASKED.match(value) or value.startswith("!"):
        return False
    if quoted:
        return len(value) >= 4 and not _CODE_VALUE.match(value) or _mixed(value)
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() and c != "_" for c in value)
    if _CODE_VALUE.match(value) and not has_digit:
        return False
    return len(value) >= 6 and (has_digit or has_symbol) and not value.isdigit()


def _assigned_secret(value: str) -> bool:
    """A key or token: mixed letters and digits, 24+ characters or 12+ random-looking ones."""
    if _TEMPLATE.search(value) or not _mixed(value):
        return False
    if len(value) >= 24:
        return True
    longest_letters = max((len(r) for r in re.findall(r"[A-Za-z]+", value)), default=0)
    return len(value) >= 12 and longest_letters <= 5 and not re.search(r"[:/@]", value)


def _group_spans(pattern: re.Pattern, text: str, accept: Callable[[str], bool]) -> Iterator[Span]:
    for m in pattern.finditer(text):
        value = m["pii"].rstrip(".")
        if accept(value):
            yield m.start("pii"), m.start("pii") + len(value)
