"""TauGym expert: authenticate, look the account up, confirm each change, make it, report.

Handled flows (the rest end politely with nothing changed): **retail** — cancel pending orders
(reason ``ordered by mistake`` when the user says so, else ``no longer needed``) and return
delivered items (refund to the payment method the user names when the policy allows it: the
original one or a gift card; else the original); **airline** — cancel reservations the policy
allows (booked within 24 h of the policy's current time, business cabin, or insured with a
health/weather reason). Orders and reservations are matched to the user's words by id, by item
name, or "all". Every write is preceded by a confirmation question and made only after a yes.
Tool results are read as JSON; a result cut by ``tool_result_chars`` is unreadable, and the
expert then cannot go on (it does not guess ids).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from mimesis.envs.tau.adapter import parse_tool_call
from mimesis.envs.turtle_judge import word_stems
from mimesis.rl.experts.base import (
    Expert,
    affirmative,
    kinds,
    replies_to_actions,
    tool_results,
    user_replies,
)
from mimesis.rollout.engine import AgentView

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")
_ZIP = re.compile(r"\b\d{5}\b")
_NAME = re.compile(r"(?:I am|I'm|my name is|this is|name's|name is)\s+([A-Z][a-z]+)\s+"
                   r"([A-Z][a-z]+)")
_USER_ID = re.compile(r"\b[a-z]+_[a-z]+_\d{3,5}\b")
_VERB = re.compile(r"\b(cancel|return|keep|exchange|modify|change)", re.IGNORECASE)
_ALL = re.compile(r"\b(all|every|everything|each)\b", re.IGNORECASE)
_NOW = re.compile(r"current time is (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_COVERED = re.compile(r"\b(sick|ill|unwell|health|medical|hospital|weather|storm)\b", re.IGNORECASE)
GREETING = ("[action] Hi! How can I help you today? To find your account, please give me your "
            "{ask}.")
ASK = {"retail": "email, or your name and zip code", "airline": "user id"}
CONFIRM_TAIL = "Shall I go ahead (yes/no)?"


@dataclass(frozen=True)
class Write:
    """One database change to confirm and make: its tool call and how it is described."""

    tool: str
    args: dict[str, Any]
    text: str
    refund: float = 0.0

    def call(self) -> str:
        return f"[search] {self.tool} {json.dumps(self.args)}"


def _json(text: str) -> dict | None:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    return value if isinstance(value, dict) else None


def _calls(view: AgentView) -> list[tuple[str, dict, str]]:
    """``(tool, arguments, result)`` of every tool call so far."""
    out = []
    for query, result in tool_results(view):
        try:
            tool, args = parse_tool_call(query)
        except ValueError:
            continue
        out.append((tool, args, result))
    return out


def mentioned(name: str, said: str) -> bool:
    """Whether a product name shares a word (stemmed, 4+ letters) with what the user said."""
    return bool({s for s in word_stems(name) if len(s) >= 4} & word_stems(said))


def requests(said: str) -> dict[str, str]:
    """What the user said after each verb (``cancel``, ``return``, ``keep`` …), up to the next
    verb or sentence end, joined per verb.

    >>> requests("Cancel the boots and keep the kettle, and return the watch.")["return"]
    'return the watch'
    """
    out: dict[str, list[str]] = {}
    for sentence in re.split(r"(?<=[.!?;])\s+", said):
        marks = [(m.start(), m.group(1).lower()) for m in _VERB.finditer(sentence)]
        if not marks:
            continue
        for (start, verb), (end, _) in zip(marks, [*marks[1:], (len(sentence), "")],
                                           strict=True):
            out.setdefault(verb, []).append(sentence[start:end].strip(" ,.;"))
    return {verb: " ".join(parts) for verb, parts in out.items()}


def retail_writes(said: str, orders: list[dict], payments: dict[str, dict]) -> list[Write]:
    """The cancellations and returns the user asked for, in order of their orders.

    A pending order is cancelled when the user names it, says "all", or names every item in it
    (the policy cancels whole orders only); delivered items are returned when named (all of an
    order's when the user says "all" or names the order).
    """
    asked = requests(said)
    cancel, back, keep = (asked.get(v, "") for v in ("cancel", "return", "keep"))
    writes = []
    for o in orders:
        items = o.get("items", [])
        oid = o["order_id"]
        if o.get("status") == "pending" and cancel:
            named = [i for i in items if mentioned(i["name"], cancel)
                     and not mentioned(i["name"], keep)]
            if oid in cancel or _ALL.search(cancel) or (items and len(named) == len(items)):
                reason = "ordered by mistake" if "mistake" in said.lower() else "no longer needed"
                writes.append(Write("cancel_pending_order", {"order_id": oid, "reason": reason},
                                    f"cancel order {oid} ({reason})",
                                    round(sum(i["price"] for i in items), 2)))
        elif o.get("status") == "delivered" and back:
            named = [i for i in items if mentioned(i["name"], back)]
            chosen = named or (items if oid in back or _ALL.search(back) else [])
            if chosen:
                method = refund_method(said, o, payments)
                names = ", ".join(i["name"] for i in chosen)
                writes.append(Write("return_delivered_order_items",
                                    {"order_id": oid, "item_ids": [i["item_id"] for i in chosen],
                                     "payment_method_id": method},
                                    f"return {names} from order {oid}, refund to {method}",
                                    round(sum(i["price"] for i in chosen), 2)))
    return writes


def refund_method(said: str, order: dict, payments: dict[str, dict]) -> str:
    """The user's named method when the policy allows it (original or a gift card), else the
    original payment method."""
    history = order.get("payment_history") or [{}]
    original = history[0].get("payment_method_id", "")
    low = said.lower()
    for pid, method in payments.items():
        source = method.get("source", "").replace("_", " ")
        if source and source in low and (pid == original or source == "gift card"):
            return pid
    return original


def airline_writes(said: str, reservations: list[dict], now: datetime | None) -> list[Write]:
    """Cancellations of the reservations the user asked about that the policy allows."""
    if "cancel" not in said.lower():
        return []
    writes = []
    for r in reservations:
        if r["reservation_id"] not in said and not _ALL.search(said):
            continue
        created = datetime.fromisoformat(r.get("created_at", "1970-01-01T00:00:00"))
        recent = now is not None and now - created <= timedelta(hours=24)
        insured = r.get("insurance") == "yes" and _COVERED.search(said)
        if recent or r.get("cabin") == "business" or insured:
            writes.append(Write("cancel_reservation", {"reservation_id": r["reservation_id"]},
                                f"cancel reservation {r['reservation_id']}"))
    return writes


class TauExpert(Expert):
    """Reads: the domain and policy in the prompt, tool results (JSON) and the user's replies.
    Strategy: greet and ask for what authentication needs; find the user; fetch their orders or
    the reservations they mention (all of them when they name none); plan the changes they asked
    for; for each, confirm and call; close with what was done and the total refund."""

    env = "TauGym"

    def act(self, view: AgentView) -> str:
        domain = "airline" if "an airline company" in view.prompt else "retail"
        said = " ".join(user_replies(view))
        calls = _calls(view)
        if view.turns_left <= 1:
            return self._close(view, calls, [])
        if not view.turns:
            return GREETING.format(ask=ASK[domain])
        user_id = self._user_id(domain, said, calls)
        if user_id is None:
            return self._authenticate(view, domain, said, calls)
        details = next((d for t, _, r in calls if t == "get_user_details" and (d := _json(r))),
                       None)
        if details is None:
            return f'[search] get_user_details {json.dumps({"user_id": user_id})}'
        fetch, records = self._records(domain, said, details, calls)
        if fetch:
            return fetch
        if domain == "retail":
            writes = retail_writes(said, records, details.get("payment_methods", {}))
        else:
            now = _NOW.search(view.prompt)
            writes = airline_writes(said, records, datetime.fromisoformat(now.group(1)) if now
                                    else None)
        return self._next_write(view, writes, calls) or self._close(view, calls, writes)

    @staticmethod
    def _user_id(domain: str, said: str, calls) -> str | None:
        if domain == "airline":
            found = _USER_ID.search(said)
            return found.group(0) if found else None
        for tool, _, result in calls:
            if tool.startswith("find_user_id") and _USER_ID.fullmatch(result.strip()):
                return result.strip()
        return None

    @staticmethod
    def _authenticate(view: AgentView, domain: str, said: str, calls) -> str:
        tried = [(t, a) for t, a, _ in calls]
        email, zip_code, name = _EMAIL.search(said), _ZIP.search(said), _NAME.search(said)
        if domain == "retail" and email:
            args = {"email": email.group(0).rstrip(".")}
            if ("find_user_id_by_email", args) not in tried:
                return f"[search] find_user_id_by_email {json.dumps(args)}"
        if domain == "retail" and zip_code and name:
            args = {"first_name": name.group(1), "last_name": name.group(2),
                    "zip": zip_code.group(0)}
            if ("find_user_id_by_name_zip", args) not in tried:
                return f"[search] find_user_id_by_name_zip {json.dumps(args)}"
        if sum(k == "action" for k in kinds(view)) < 3:
            return ("[action] Sorry, I could not find your account. Could you give me your "
                    f"{ASK[domain]}?")
        return "[answer] I'm sorry, without verifying your account I can't make changes."

    @staticmethod
    def _records(domain: str, said: str, details: dict, calls) -> tuple[str | None, list[dict]]:
        """The next fetch to make (or ``None``) and the order/reservation records so far."""
        tool, key = (("get_order_details", "order_id") if domain == "retail" else
                     ("get_reservation_details", "reservation_id"))
        ids = details.get("orders" if domain == "retail" else "reservations", [])
        named = [i for i in ids if i in said]
        wanted = named if domain == "airline" and named else ids
        got = {a.get(key): r for t, a, r in calls if t == tool}
        for i in sorted(wanted, key=lambda i: i not in named):
            if i not in got:
                return f"[search] {tool} {json.dumps({key: i})}", []
        return None, [rec for i in wanted if (rec := _json(got[i]))]

    @staticmethod
    def _next_write(view: AgentView, writes: list[Write], calls) -> str | None:
        made = {(t, json.dumps(a, sort_keys=True)) for t, a, r in calls
                if not r.startswith("Error")}
        qa = replies_to_actions(view)
        for w in writes:
            if (w.tool, json.dumps(w.args, sort_keys=True)) in made:
                continue
            answers = [r for q, r in qa if w.text in q]
            if not answers:
                if view.turns_left < 3:  # confirm + call + close
                    return None
                return f"[action] To confirm: {w.text}. {CONFIRM_TAIL}"
            if affirmative(answers[-1]):
                return w.call()
        return None

    @staticmethod
    def _close(view: AgentView, calls, writes: list[Write]) -> str:
        made = {(t, json.dumps(a, sort_keys=True)) for t, a, r in calls
                if not r.startswith("Error")}
        done = [w for w in writes if (w.tool, json.dumps(w.args, sort_keys=True)) in made]
        if not done:
            return "[answer] I'm sorry I couldn't complete that for you today. Goodbye!"
        refund = round(sum(w.refund for w in done), 2)
        amount = f"{refund:.2f}".rstrip("0").rstrip(".")
        total = f" Your total refund is ${amount}." if refund else ""
        return f"[answer] Done: {'; '.join(w.text for w in done)}.{total}"
