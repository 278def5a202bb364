"""Find credentials in text: detect-secrets' maintained patterns, plus ours for what they miss.

From ``detect-secrets`` (Yelp, 1.5.0) we take the regexes (``denylist``) of its token plugins
(AWS, GitHub, GitLab, JWT, Slack, Stripe, OpenAI, SendGrid, Twilio, npm, PyPI, Discord, Telegram,
Mailchimp, Square, Azure) and apply them to free text. Its keyword and entropy plugins are built
for source files, and its IBM / SoftLayer / Cloudant keyword rules cost half of the scrub's time
on chat text for services that our assignment rule covers, so these are not used. Its OpenAI rule needs the
``T3BlbkFJ`` marker that newer keys lack, its Slack rule wants lowercase tokens and its GitHub rule
exact lengths, so ours add: ``sk-`` / ``sk-proj-`` / ``sk-ant-`` keys, Google ``AIza`` keys,
``xox?-`` Slack tokens, ``github_pat_`` / ``gh?_`` tokens, Hugging Face ``hf_`` tokens, Stripe
keys, ``Bearer`` tokens, PEM private-key blocks, and ``<name with key/secret/token/password> =
<value of 24+ characters>`` assignments (the value only is replaced; a value must mix letters and
digits and not look like a template such as ``YOUR_API_KEY``).

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
    r"|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}"
    r")"
)
_KEYWORDS = ("key", "secret", "token", "passw", "pwd", "credential")
_BEARER = re.compile(r"(?i:\bbearer)\s+(?P<pii>[A-Za-z0-9_\-.=+/~]{20,})")
_ASSIGNMENT = re.compile(
    r"(?i:api[_-]?key|apikey|secret|token|passw(?:or)?d|pwd"
    r"|access[_-]?key|private[_-]?key|auth[_-]?key|credentials?)[A-Za-z0-9_]*[\"']?\]?"
    r"\s*(?:=>|:=|[:=])\s*[\"'`]?(?P<pii>[^\s\"'`,;()\[\]{}<>]{24,})"
)


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
        yield from _group_spans(_ASSIGNMENT, text, _assigned_secret)


def _assigned_secret(value: str) -> bool:
    return not _TEMPLATE.search(value) and _mixed(value)


def _group_spans(pattern: re.Pattern, text: str, accept: Callable[[str], bool]) -> Iterator[Span]:
    for m in pattern.finditer(text):
        value = m["pii"].rstrip(".")
        if accept(value):
            yield m.start("pii"), m.start("pii") + len(value)
