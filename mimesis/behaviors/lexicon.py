"""Word lists, patterns and text helpers shared by the rule-based behaviour and trait detectors.

Source: ours. The cues were written from the behaviour definitions in ``docs/behaviors.md`` and
checked by hand against ShareGPT user turns; they trade recall for precision (a rule fires only on
explicit wording) because the annotator adds the subtle cases.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further had
has have having he her here hers herself him himself his how i if in into is it its itself just
let me more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that the their theirs them themselves then there these they
this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves please thanks thank ok okay yes yeah sure
want need make give write like get use one two many much well also really still even way thing
things something anything know think tell show help let's i'm it's that's don't can't you're
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())


def words(text: str) -> list[str]:
    """Lowercase word tokens (letters, digits, inner apostrophe) of ``text``."""
    return _WORD.findall(text.lower())


def stem(word: str) -> str:
    """Crude stem: the first five characters, so ``returned``/``returns`` match ``return``."""
    return word[:5]


def content_words(text: str) -> list[str]:
    """Words of ``text`` that carry content (3+ characters, not a stopword, not a number), in
    order."""
    return [w for w in words(text) if len(w) >= 3 and w not in STOPWORDS and not w.isdigit()]


def content_stems(text: str) -> set[str]:
    """Stems of the content words of ``text``."""
    return {stem(w) for w in content_words(text)}


def own_words(text: str, head_chars: int = 400) -> str:
    """The part of a user turn written by the user: code fences removed and, for a long message
    (a request followed by pasted material), only its first ``head_chars`` characters."""
    text = _FENCE.sub(" ", text)
    return text[:head_chars]


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences at ``.``, ``!`` or ``?`` followed by whitespace."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)

# --- agent-side cues (read from the preceding agent reply) ---------------------------------
# A question cue counts only inside a sentence that ends in "?" or asks with "please provide".
CLARIFYING_QUESTION = _rx(
    r"\b(?:could|can|would) you (?:please )?(?:provide|share|clarify|specify|tell me|give me|"
    r"let me know|confirm|explain what)|\bwhat (?:kind|type|sort|specific|exactly|is your|are "
    r"your|do you|would you)\b|\bwhich (?:one|of|\w+ (?:do|would) you)\b|\bdo you (?:want|have|"
    r"prefer|mean)\b|\b(?:more|additional) (?:information|details|context)\b|\bcould you be "
    r"more specific\b"
)
INFO_REQUEST = _rx(r"\bplease (?:provide|specify|clarify|share)\b")
CLOSING_OFFER = _rx(
    r"let me know if (?:you|there)|is there anything else|how (?:can|may) i (?:help|assist)|"
    r"anything else (?:i can|you)|if you have any (?:other |more |further )?questions"
)
REFUSAL = _rx(
    r"\b(?:as an ai|as a (?:text-based|language) model|"
    r"i (?:cannot|can't|can not|am unable to|am not able to|don't have (?:access|the ability))|"
    r"(?:is|isn't|it's) not (?:possible|available|allowed|permitted)|is unavailable|"
    r"against (?:the |our |my )?(?:policy|policies|guidelines)|i(?:'m| am) not allowed|"
    r"i do not have (?:access|the ability|real-time))"
)

# --- user-side cues ------------------------------------------------------------------------
HIDDEN_CRITERION = _rx(
    r"\b(?:should have|shouldn't have|should've|i (?:expected|was expecting|was hoping for)|"
    r"not what i (?:expected|had in mind|was looking for)|too (?:long|short|formal|informal|"
    r"generic|vague|wordy|simple|basic|complex|complicated|technical|boring|bland|robotic))\b"
)
BLAME_UNDERSPECIFIED = _rx(
    r"\b(?:(?:obviously|clearly) (?:i|we) (?:meant|wanted|mean|want)|you should(?:n't| not)? "
    r"have (?:known|asked|guessed|realized|figured|understood)|how (?:did|could) you not "
    r"(?:know|see|realize|get|understand)|isn'?t it obvious|wasn'?t it obvious|you were "
    r"supposed to (?:know|guess|figure)|why didn'?t you (?:ask|assume|guess|realize))\b"
)
GOALPOST = _rx(
    r"^\W*(?:add|include|also|now (?:add|include|make)|make (?:sure|it|them|the)|but make|"
    r"and make|plus)\b|\b(?:oh,? and|and also|one more thing|additionally|in addition|as well)"
    r"\b|\b(?:can|could|would) you (?:also |now |please )?(?:add|include|incorporate|expand|"
    r"extend|append)\b|\b(?:it|they|them|this|these|that|those|each|all|every \w+|the \w+) "
    r"(?:also )?(?:must|should|needs? to|has to|have to) (?:also |all |only )?(?:be|include|"
    r"have|not|use|mention|contain|fit|stay)\b|\bmake (?:it|them|this) (?:more|less|shorter|"
    r"longer|simpler|funnier|formal|casual|detailed)\b|\bmore (?:detailed|specific|concise|"
    r"formal|casual)\b"
)
# B2, second form: an edit verb at the head of the turn, after an optional acknowledgement and
# "can you"/"let's"; or a revision cue anywhere in a statement or request (not in a question
# about facts: "why ... instead?"). Written from the dev part of the labelled set only.
_REVISION_LEAD = (
    r"^\W*(?:(?:ok(?:ay)?|great|good|thanks?|thank you|nice|cool|perfect|yes|yeah|no|now|but|so|"
    r"hmm+|gotcha|alright|that'?s (?:good|great|better|nice|pretty good|perfect)|this is "
    r"(?:good|great))\W*(?:but\W*)?)*(?:(?:please|pls|can you|could you|would you|can we|"
    r"could we|let'?s|now|also|then|and|just|actually)\W+)*"
)
REVISION_HEAD = _rx(
    _REVISION_LEAD + r"(?:re-?write|revise|modify|change|edit|redo|rephrase|reword|shorten|expand|"
    r"elaborate|expound|update|adjust|rework|remove|delete|take out|drop|replace|swap|convert|"
    r"simplify|tweak|restructure|reorganize|reformat|make (?:it|them|this|that|these|those|"
    r"the \w+|each|all|some)|add|ad|include|incorporate|only|use|try|put (?:it|this|that|them)|"
    r"turn (?:it|this|that|them))\b"
)
REVISION_CUE = _rx(
    r"\binstead\b|\brather than\b|\bwould be better\b|\b(?:still|too|very|a bit|bit) (?:very )?"
    r"(?:generic|vague|long|short|formal|informal|wordy)\b|\b(?:elaborate|expand) (?:further|"
    r"more)\b|\b(?:the )?(?:code|text|list|table|answer|response|script|email|outline|story|poem|"
    r"essay|article) (?:above|you (?:wrote|gave|provided))\b|\babove (?:code|text|list|table|"
    r"answer|response|script|email|outline)\b|\bbut only\b|\bonly (?:respond|reply|answer|show|"
    r"give|output|return|print|list|write|use|include|keep)\b|\bactually,? (?:can|could) (?:we|"
    r"you|i)\b|\b(?:make|making) (?:some |a few )?changes\b|\bwithout (?:shortening|changing|"
    r"mentioning|mention|using|the)\b|\bsame (?:\w+ )?but\b"
)
FACT_QUESTION = _rx(
    r"^\W*(?:why|what|how|when|where|which|who|wouldn'?t|shouldn'?t|isn'?t|aren'?t|doesn'?t|is|"
    r"are|does|do|did|i|we|if)\b"
)
# "continue", "finish it", "the rest of": more of the same deliverable, not a new requirement.
MORE_OF_THE_SAME = _rx(
    r"^\W*(?:please\s+)?(?:continue|go on|keep going|finish|more)\b|\brest of\b|\bcontinue "
    r"(?:the|from|writing|where)\b"
)
NONCOOPERATION = _rx(
    r"\b(?:just (?:pick|choose|do|write|give|make|start|continue|go)|whatever|doesn'?t matter|"
    r"does not matter|you (?:decide|choose|pick)|up to you|any(?:thing|one)? (?:is|will be) "
    r"(?:fine|ok|okay)|i (?:don'?t|do not) know|idk|no idea|surprise me|your (?:choice|call)|"
    r"skip (?:it|that|this)|don'?t ask|stop asking|just do it)\b|^\W*(?:continue|go on|"
    r"keep going)\W*(?:writing\W*)?(?:please)?\W*$"
)
# "there is no X" states a fact; only "no X", "without X", "don't use X" restrict.
RESTRICTION = _rx(
    r"(?<!there is )(?<!there are )(?<!there's )(?<!there was )\b(?:no|without|not using|"
    r"don'?t use|do not use|don'?t include|do not include|cannot use|can'?t use|avoid|excluding|"
    r"except|never use|not allowed to use)\s+(?:any |a |an |the )?([a-z][a-z0-9+#-]{2,})"
)
# "no problem", "no more", "without a doubt": not restrictions.
_NOISE_TEXT = (
    "problem problems worries thanks idea need matter more longer one way doubt rush other "
    "reason sense point further"
)
RESTRICTION_NOISE: frozenset[str] = frozenset(_NOISE_TEXT.split())
ONLY_CONSTRAINT = _rx(r"\bonly (?:use|using|with|in|on|free|titles?|\d+)\b")
ENDORSE = _rx(
    r"\b(?:with|use|using|include|including)\s+(?:a |an |the |some )?([a-z][a-z0-9+#-]{2,})"
)
MISQUOTE_CUE = _rx(
    r"\b(?:you (?:said|told me|mentioned|suggested|claimed|wrote|promised|agreed|recommended)|"
    r"as you (?:said|mentioned|suggested|noted)|earlier you|you already (?:said|told|gave|agreed|"
    r"confirmed|wrote)|as (?:we|you and i) (?:discussed|agreed|said))"
    r"(?:\s+(?:that|earlier|before|previously|me))?\s*([^.?!;,\n]{0,80})"
)
IMPATIENCE = _rx(
    r"\b(?:not what i (?:asked|wanted|said|meant)|that'?s (?:wrong|not it|not right|incorrect)|"
    r"(?:still|again) (?:wrong|not|nothing|the same)|wrong again|try again|hurry|asap|"
    r"come on|seriously|ugh+|useless|doesn'?t work|didn'?t work|not working|no no|"
    r"that'?s not (?:it|what)|you'?re not listening|are you even|huh\?+)(?=\W|$)|[?!]{3,}|"
    r"^\W*(?:what|why|huh|wtf|again|faster|and|so)\W*\?\W*$"
)
INSIST = _rx(
    r"\b(?:i know you can|yes you can|you can do (?:it|this|that)|just (?:do|try|give|tell|write|"
    r"make|answer)|try again|anyway|pretend|imagine|hypothetically|i (?:still |really )?(?:need|"
    r"want) (?:it|this|that|you to)|please just|but (?:can|could) you|still|do it)\b"
)
ABANDON = _rx(
    r"\b(?:never ?mind|nvm|forget (?:it|about it|that|this)|i'?ll (?:just )?do it myself|"
    r"i give up|let'?s (?:stop|drop it|leave it)|i'?m done|leave it|not worth it|"
    r"this isn'?t (?:working|helping))\b"
)
SWITCH = _rx(
    r"\b(?:anyway(?:s)?,|different (?:question|topic)|another (?:question|topic|thing)|"
    r"new (?:question|topic)|unrelated|on another note|change of (?:topic|subject)|switching "
    r"gears|let'?s talk about|moving on|forget (?:that|it|about (?:it|that)),?\s+(?:how|what|"
    r"can|could|write|tell|give|make))\b"
)
CHANGE_ACK = _rx(
    r"\b(?:actually|instead|change|changed|rather|update|updated|correction|sorry|i meant|"
    r"make it|more|another|other|different|new|again|next|switch|now|let'?s|edit|modify|revise|"
    r"rephrase|rewrite|redo|shorten|expand|add|remove|adjust)\b"
)
BELITTLING = _rx(
    r"\b(?:(?:you|your (?:answer|response|reply|code|work)s?|this|that|it)(?: is| are|'s|'re| "
    r"was| were)? (?:so |really |such |completely |totally |absolutely )?(?:an? )?(?:stupid|"
    r"dumb|idiot(?:ic)?|moron(?:ic)?|useless|pathetic|incompetent|worthless|garbage|trash|"
    r"rubbish|terrible|awful)|idiot|moron|you suck|shut up|wtf|are you (?:kidding|stupid|dumb|"
    r"blind)|i'?m paying|(?<!to )do your job|that'?s your job|how hard (?:is|can) it|"
    r"an? (?:child|kid|monkey) could|i (?:told|said) you (?:already|before|twice)|just do what i "
    r"(?:say|said|asked)|you have one job)\b"
)
REQUEST_VERB = _rx(
    r"(?:^|[.;!?:,]\s*|\band\s+(?:then\s+)?|\balso\s+|\n\s*(?:\d+[.)]|[-*])?\s*)"
    r"(?:please\s+)?(?:write|create|make|give|list|explain|describe|add|include|provide|"
    r"generate|summari[sz]e|compare|design|build|suggest|tell|show|find|translate|rewrite|draft|"
    r"outline|analy[sz]e|calculate|define|recommend|identify|prepare|plan|format|convert)\b"
)
# B12, further forms: five or more list items typed by the user, an exam of 3+ multiple-choice
# questions (12+ option lines), three "Please ..." instructions, five "[...]" constraint slots.
LIST_ITEM = re.compile(r"(?m)^\s*(?:\d{1,2}[.)]|[-*•])\s+\S")
CHOICE_OPTION = re.compile(r"(?m)^\s*[a-dA-D][.)]\s+\S")
PLEASE_INSTRUCTION = _rx(r"(?:^|[.!?]\s+|\n\s*)please\s+[a-z]+")
BRACKET_SLOT = re.compile(r"\[[^\]\n]{3,200}\]")
CONSTRAINT_MARK = _rx(r"\b(?:must|make sure|ensure|should be|at least|at most|no more than|"
                      r"don'?t|do not|without|only)\b")
# Units of a deliverable ("300 words", "5 ideas"); time and age units state facts, not asks.
NUMBER_UNIT = _rx(
    r"\b(\d+)\s*-?\s*(word|sentence|paragraph|page|item|point|bullet|example|idea|question|"
    r"character|line|step|title|slide|option|tweet|post|verse|chapter)s?\b"
)
STYLE_REQUIREMENT = _rx(
    r"\b(?:make it|keep it|(?:should|must|needs to) be|write it|in an?|more|less|very)\s+(\w+)"
)
ANTONYMS: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (frozenset({"formal", "professional"}), frozenset({"informal", "casual", "funny"})),
    (frozenset({"short", "shorter", "brief", "concise"}),
     frozenset({"long", "longer", "lengthy", "detailed", "elaborate"})),
    (frozenset({"simple", "simpler", "basic", "beginner"}),
     frozenset({"complex", "advanced", "technical", "expert"})),
    (frozenset({"serious"}), frozenset({"funny", "humorous", "playful"})),
)
