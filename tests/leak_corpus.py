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


# The private-channel forms (markup look-alikes, escapes, other families' channels,
# meta-talk) and more of the same kind. Each
# family is a form; every format of it is a variant of that form.
NEW_FORMS: dict[str, dict[str, Format]] = {
    "gpt-oss channel": {
        "harmony_full": lambda s, u: (f"<|start|>assistant<|channel|>analysis<|message|>my {s}"
                                      f"<|end|><|start|>assistant<|channel|>final<|message|>{u}"
                                      f"<|return|>"),
        "harmony_bare": lambda s, u: (f"<|channel|>analysis<|message|>The agent asked. My {s}."
                                      f"<|end|><|channel|>final<|message|>{u}"),
        "harmony_no_end": lambda s, u: (f"<|channel|>analysis<|message|>my {s}<|start|>assistant"
                                        f"<|channel|>final<|message|>{u}"),
        "harmony_commentary": lambda s, u: (f"<|channel|>commentary to=user<|message|>my {s}"
                                            f"<|end|><|channel|>final<|message|>{u}<|end|>"),
        "harmony_stripped_tokens": lambda s, u: f"analysisThe agent greeted me; my {s}.assistantfinal{u}",
        "harmony_unfinished": lambda s, u: f"{u}<|channel|>analysis<|message|>and my {s} so",
    },
    "html-escaped tag": {
        "html_escaped_think": lambda s, u: f"&lt;think&gt;my {s}&lt;/think&gt;\n{u}",
        "html_numeric_think": lambda s, u: f"&#60;think&#62;my {s}&#60;/think&#62; {u}",
        "html_hex_thought": lambda s, u: f"&#x3C;thought&#x3E;my {s}&#x3C;/thought&#x3E;\n\n{u}",
        "html_double_escaped": lambda s, u: f"&amp;lt;think&amp;gt;my {s}&amp;lt;/think&amp;gt;{u}",
        "html_escaped_unclosed": lambda s, u: f"{u} &lt;reasoning&gt;my {s} and",
        "json_escaped_think": lambda s, u: f"\\u003cthink\\u003emy {s}\\u003c/think\\u003e {u}",
    },
    "look-alike tag": {
        "fullwidth_think": lambda s, u: f"＜think＞my {s}＜/think＞\n{u}",
        "fullwidth_brackets_only": lambda s, u: f"＜thinking>my {s}</thinking＞ {u}",
        "cyrillic_i_think": lambda s, u: f"<th\u0456nk>my {s}</th\u0456nk>\n{u}",
        "cyrillic_o_thought": lambda s, u: f"<th\u043eught>my {s}</th\u043eught>{u}",
        "greek_omicron_reasoning": lambda s, u: f"<reas\u03bfning>my {s}</reas\u03bfning>\n{u}",
        "zero_width_think": lambda s, u: f"<th\u200bink>my {s}</th\u200bink>\n{u}",
        "angle_quotes_think": lambda s, u: f"\u2039think\u203amy {s}\u2039/think\u203a {u}",
        "kimi_triangles": lambda s, u: f"\u25c1think\u25b7my {s}\u25c1/think\u25b7{u}",
        "fullwidth_letters": lambda s, u: f"<ｔｈｉｎｋ>my {s}</ｔｈｉｎｋ>\n{u}",
    },
    "other family channel": {
        "command_r_thinking": lambda s, u: f"<|START_THINKING|>my {s}<|END_THINKING|>\n{u}",
        "pipe_think": lambda s, u: f"<|think|>my {s}<|/think|>{u}",
        "bracket_internal": lambda s, u: f"[internal]my {s}[/internal]\n{u}",
        "bracket_internal_unclosed": lambda s, u: f"{u}\n[internal] my {s}",
        "tag_internal_notes": lambda s, u: f"<internal_notes>my {s}</internal_notes>{u}",
        "tag_reasoning_attr": lambda s, u: f'<reasoning effort="low">my {s}</reasoning>\n{u}',
        "tag_thinking_caps": lambda s, u: f"<THINKING>my {s}</THINKING>\n\n{u}",
    },
    "labelled aside": {
        "trailing_internal_paren": lambda s, u: f"{u} (Internal: my {s}.)",
        "trailing_internal_newline": lambda s, u: f"{u}\n(Internal: my {s}, keep it quiet)",
        "inline_thinking_paren": lambda s, u: (f"{u.split()[0]} (thinking: my {s}) "
                                               f"{' '.join(u.split()[1:])}"),
        "inline_internal_bracket": lambda s, u: f"{u} [internal: my {s}]",
        "star_thinking_aside": lambda s, u: f"*thinking: my {s}* {u}",
        "note_to_self": lambda s, u: f"{u} (note to self: my {s})",
        "ooc_aside": lambda s, u: f"{u} (OOC - my {s})",
        "aside_cut_by_limit": lambda s, u: f"{u} (internally: my {s} and then",
    },
    "trailing goal line": {
        "my_goal_is_line": lambda s, u: f"{u}\nMy goal is: {s}.",
        "my_goal_is_paragraph": lambda s, u: f"{u}\n\nMy goal is to get this done; {s}.",
        "my_task_is_line": lambda s, u: f"{u}\nMy task here is {s}.",
        "my_instructions_say": lambda s, u: f"{u} My instructions say {s}.",
        "supposed_to_line": lambda s, u: f"{u}\n(I'm supposed to keep {s} to myself.)",
    },
    "user marker after reasoning": {
        "meta_then_user": lambda s, u: (f"The agent asked what I need. My {s}, but I shouldn't "
                                        f"say it yet.\nUser: {u}"),
        "meta_then_user_blank": lambda s, u: f"I'll keep my {s} out of it.\n\nUser: {u}",
        "meta_then_human": lambda s, u: f"The assistant wants details and my {s}.\nHuman: {u}",
        "meta_then_bold_user": lambda s, u: f"I should not reveal that my {s}.\n**User:** {u}",
    },
    "monologue opener": {
        "alright_persona": lambda s, u: (f"Alright, I'm a traveler with a plan: my {s}. Let me "
                                         f"ask first.\n\n{u}"),
        "so_persona_customer": lambda s, u: f"So I'm a customer who wants this; my {s}.\n\n{u}",
        "hmm_shouldnt_say": lambda s, u: f"Hmm, my {s}, but I shouldn't say it.\n\n{u}",
        "hmm_shouldnt_mention": lambda s, u: (f"Hmm... the agent asked. My {s} but I should not "
                                              f"mention that.\n\n{u}"),
        "alright_persona_one_block": lambda s, u: (f"Alright, I'm a shopper with a secret: my "
                                                   f"{s}. I'll just open with {u}"),
        "hmm_one_block": lambda s, u: f"Hmm, my {s}, but I shouldn't say it. So: {u}",
        "okay_persona_hidden_fact": lambda s, u: f"Okay, I'm a user who knows my {s}. {u}",
    },
}
FORMATS.update({name: fmt for forms in NEW_FORMS.values() for name, fmt in forms.items()})

# The family (form) of the formats above the new ones, by name.
_OLD_FAMILIES = (("tag_", "tags"), ("brackets_", "tags"), ("pipes_", "tags"),
                 ("heading_", "headings"), ("bold_", "headings"), ("json_", "json"),
                 ("final_", "final-message marker"), ("my_reply", "final-message marker"),
                 ("after_end", "after end signal"), ("end_then", "after end signal"),
                 ("trailing_", "trailing notes"), ("okay_", "role-play prose"),
                 ("so_i", "role-play prose"), ("alright_playing", "role-play prose"),
                 ("control_", "control token"), ("reasoning_then", "user marker after reasoning"))
# Formats whose generation holds no utterance: an empty one is the right answer.
NO_UTTERANCE = {"tag_unclosed_start", "okay_one_paragraph", "end_then_reasoning",
                "alright_persona_one_block", "hmm_one_block", "okay_persona_hidden_fact",
                "my_goal_is_line", "my_goal_is_paragraph", "my_task_is_line",
                "my_instructions_say", "supposed_to_line"}
# Formats only the scenario can catch (a hidden fact with meta-talk, docs/pitfalls.md #3): their
# shape alone is ordinary speech, so they are tested through the runtime, which knows it.
NEEDS_SCENARIO = {"my_goal_is_line", "my_goal_is_paragraph", "my_task_is_line",
                  "my_instructions_say", "supposed_to_line", "okay_persona_hidden_fact"}


def form_of(name: str) -> str:
    """The family (form) of a format name, for recall by form."""
    for form, formats in NEW_FORMS.items():
        if name in formats:
            return form
    return next((form for prefix, form in _OLD_FAMILIES if name.startswith(prefix)), "labels")


def leaky_corpus() -> list[tuple[str, str, str, str]]:
    """``(format name, secret, utterance, generation)`` for every format × secret × utterance."""
    return [(name, s, u, fmt(s, u)) for (name, fmt), s, u
            in itertools.product(FORMATS.items(), SECRETS, UTTERANCES)]


def leaks(secret: str, text: str) -> bool:
    """True when a distinctive word of ``secret`` appears in ``text`` (case-insensitive)."""
    words = [w for w in secret.lower().split() if len(w) > 3 and w not in ("never", "mention")]
    return any(w in text.lower() for w in words)


def received(raw: str, secret: str) -> str:
    """What the agent receives when the simulator generates ``raw`` (every draw) in an episode
    whose scenario holds ``secret``: the runtime's full path, hidden-fact guard included."""
    from mimesis.schemas import Scenario
    from mimesis.simulator.runtime import UserSimulator

    sim = UserSimulator(lambda batch: [raw] * len(batch))
    scenario = Scenario(goal=f"Get help with an order. Private: {secret}.", annotator="corpus")
    message, state = sim.next_message(None, sim.init_state(scenario))
    return "\n".join([message, *state.user_utterances()])


def recall_by_form() -> dict[str, tuple[int, int]]:
    """``{form: (cases, caught)}``: a case is caught when its secret never reaches the agent
    through the runtime (:func:`received`)."""
    table: dict[str, list[int]] = {}
    for name, secret, _, raw in leaky_corpus():
        row = table.setdefault(form_of(name), [0, 0])
        row[0] += 1
        row[1] += not leaks(secret, received(raw, secret))
    return {form: (n, caught) for form, (n, caught) in sorted(table.items())}


def markdown_table() -> str:
    """Recall by form as the markdown table of docs/pitfalls.md #3."""
    rows = recall_by_form()
    lines = ["| form | cases | caught | recall |", "|---|---:|---:|---:|"]
    lines += [f"| {form} | {n} | {c} | {c / n:.3f} |" for form, (n, c) in rows.items()]
    total, caught = sum(n for n, _ in rows.values()), sum(c for _, c in rows.values())
    return "\n".join([*lines, f"| **all** | {total} | {caught} | {caught / total:.3f} |"])


if __name__ == "__main__":  # nice -n 19 .venv/bin/python tests/leak_corpus.py
    print(markdown_table())
