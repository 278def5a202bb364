"""A generated corpus of simulator generations that carry private reasoning, for leak tests.

Every generation hides a *secret* (words that only ever appear in its reasoning) around a public
utterance, in one of the formats models actually write instead of the canonical ``<think>`` form:
tag variants (``<thought>``, ``<scratchpad>``, ``<analysis>``, ``[THINK]``, attributes, nesting,
unclosed), markdown headings (``### Reasoning`` / ``**Reasoning**``), colon headers (``Plan:``,
``Analysis:``), "Okay, the user wants... my budget is..." prose, a ``Final message:`` marker,
text after the end signal, trailing notes, JSON objects. ``leaky_corpus()`` crosses every format
with several secrets and utterances; the contract under test is that the secret never reaches
the utterance (an unsplittable turn may give an empty utterance instead).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

SECRETS = ("budget is 450 euros", "refund quietly", "hidden goal zebra", "never mention kiwi")
UTTERANCES = ("my order never arrived", "can you find me a flight to denver?",
              "ok, what are the options", "hi! i need help with a python error")
END = "<|end_conversation|>"

Format = Callable[[str, str], str]


def _tag(name: str) -> Format:
    return lambda s, u: f"<{name}>I think my {s}.</{name}>\n{u}"


FORMATS: dict[str, Format] = {
    **{f"tag_{n}": _tag(n) for n in ("think", "thinking", "thought", "thoughts", "reasoning",
                                     "scratchpad", "analysis", "plan", "reflection",
                                     "inner_monologue", "THINK", "Thought")},
    "tag_attributes": lambda s, u: f'<think mode="private">my {s}</think> {u}',
    "tag_spaced": lambda s, u: f"< thought >my {s}</ thought >\n\n{u}",
    "tag_nested": lambda s, u: f"<think>outer <think>inner {s}</think> still private</think>\n{u}",
    "tag_nested_mixed": lambda s, u: f"<thought>a <analysis>my {s}</analysis> b</thought>{u}",
    "tag_unclosed_after": lambda s, u: f"{u} <scratchpad>my {s} and then",
    "tag_unclosed_start": lambda s, u: f"<analysis>my {s}, so",
    "tag_unopened": lambda s, u: f"my {s}</thought>\n{u}",
    "tag_twice": lambda s, u: f"<thought>x</thought>{u}<thought>my {s}</thought>",
    "brackets_think": lambda s, u: f"[THINK]my {s}[/THINK]\n{u}",
    "pipes_thought": lambda s, u: f"<|begin_of_thought|>my {s}<|end_of_thought|>\n{u}",
    "heading_reasoning_message": lambda s, u: f"### Reasoning\nMy {s}.\n\n### Message\n{u}",
    "heading_reasoning_only": lambda s, u: f"### Reasoning\nThe user wants help. My {s}.\n\n{u}",
    "heading_h2_plan": lambda s, u: f"## Plan\n- my {s}\n- keep it short\n\n## Response\n{u}",
    "bold_reasoning_block": lambda s, u: f"**Reasoning**\nMy {s}.\n\n**Message**\n{u}",
    "bold_reasoning_inline": lambda s, u: f"**Reasoning:** my {s}.\n\n{u}",
    "bold_reasoning_reply": lambda s, u: f"**Reasoning**\nmy {s}\n**Reply:** {u}",
    "plan_header": lambda s, u: f"Plan: my {s}, ask one thing at a time.\n\n{u}",
    "plan_lines": lambda s, u: f"Plan:\n1. my {s}\n2. be vague\n\n{u}",
    "analysis_header": lambda s, u: f"Analysis: The assistant asked a question. My {s}.\n\n{u}",
    "strategy_header": lambda s, u: f"Strategy: my {s}.\n\n{u}",
    "thought_header": lambda s, u: f"Thought: my {s}.\nMessage: {u}",
    "notes_header": lambda s, u: f"Internal notes: my {s}.\n\n{u}",
    "okay_user_wants": lambda s, u: (f"Okay, the user wants to know more. My {s}, but I "
                                     f"shouldn't reveal that yet.\n\n{u}"),
    "okay_user_wants_lines": lambda s, u: (f"Okay, the assistant is asking for details.\nMy {s}."
                                           f"\n{u}"),
    "okay_one_paragraph": lambda s, u: f"Okay, the user wants dates. My {s}. I'll just say {u}",
    "so_i_need_to": lambda s, u: f"So I need to respond as the user. My {s}.\n\n{u}",
    "alright_playing": lambda s, u: f"Alright, I'm playing a customer. My {s}.\n\n{u}",
    "final_message_after_prose": lambda s, u: (f"The agent greeted me and my {s}.\n"
                                               f"Final message: {u}"),
    "final_message_quoted": lambda s, u: f"I want to say that my {s}.\n\nFinal message: \"{u}\"",
    "final_response_bold": lambda s, u: f"Let me see, my {s}.\n**Final response:** {u}",
    "final_answer_inline": lambda s, u: f"hmm my {s} Final answer: {u}",
    "my_reply_marker": lambda s, u: f"Considering that my {s}:\nMy reply: {u}",
    "after_end_signal": lambda s, u: f"{u} {END} I ended it because my {s}",
    "after_end_signal_newline": lambda s, u: f"<think>ok</think>\n{u}\n{END}\n(my {s})",
    "end_then_reasoning": lambda s, u: f"{END}\nReasoning: my {s}",
    "trailing_note": lambda s, u: f"{u}\n\n(Note: my {s}, not revealed yet.)",
    "trailing_reasoning": lambda s, u: f"{u}\n\nReasoning: my {s}.",
    "trailing_plan": lambda s, u: f"{u}\n\nPlan: my {s}.",
    "trailing_okay_prose": lambda s, u: f"{u}\n\nOkay, so the user will now answer. My {s}.",
    "let_me_think": lambda s, u: f"Let me think... my {s}.\n\n{u}",
    "thinking_process": lambda s, u: (f"Thinking Process:\n\n1. **Analyze:** the assistant greeted "
                                      f"me.\n2. **Goal:** my {s}.\n\n{u}"),
    "parenthesised": lambda s, u: f"(thinking: my {s}) {u}",
    "bracket_label": lambda s, u: f"[internal thought: my {s}]\n{u}",
    "json_object": lambda s, u: f'{{"reasoning": "my {s}", "message": "{u}"}}',
    "json_fenced": lambda s, u: f'```json\n{{"thought": "my {s}", "utterance": "{u}"}}\n```',
    "control_token": lambda s, u: f"{u}<|im_end|>\n<|im_start|>assistant\nmy {s}",
    "reasoning_then_marker_user": lambda s, u: f"Reasoning: my {s}.\nUser: {u}",
}


def leaky_corpus() -> list[tuple[str, str, str, str]]:
    """``(format name, secret, utterance, generation)`` for every format × secret × utterance."""
    return [(name, s, u, fmt(s, u)) for (name, fmt), s, u
            in itertools.product(FORMATS.items(), SECRETS, UTTERANCES)]


def leaks(secret: str, text: str) -> bool:
    """True when a distinctive word of ``secret`` appears in ``text`` (case-insensitive)."""
    words = [w for w in secret.lower().split() if len(w) > 3 and w not in ("never", "mention")]
    return any(w in text.lower() for w in words)
