"""What a message does rather than what it is about: small talk and standing instructions.

Both are decided by wording alone (no vectors), so they hold whatever embedding model a vault
uses. Small talk never becomes a topic; a standing instruction ("be concise", "I'm on a Mac, so
give me macOS commands from here on") becomes sticky: sent with every request.
"""

from __future__ import annotations

import re

from smart_context.topics.offline.text import is_trivial, terms_of

# --- small talk ---------------------------------------------------------------------------

# Courtesy that marks a message as talk about the talk: thanks, greetings, acknowledgements.
_COURTESY = re.compile(
    r"\b(?:thanks?|thank you|thx|ty|cheers|you'?re welcome|welcome|glad|happy to help|anytime|"
    r"good luck|have a (?:good|great|nice|lovely)|enjoy|hello|hi|hey|bye|goodbye|see you|"
    r"noted|understood|got it|will do|sure|certainly|of course|sounds good|makes sense|"
    r"perfect|great|brilliant|awesome|excellent|cool|nice|ok|okay|alright|that (?:did it|"
    r"worked|works|helps|helped)|it (?:worked|works)|no problem|no worries)\b"
)
_SMALL_TALK_WORDS = 15  # longer messages carry content whatever their courtesy
_SMALL_TALK_TERMS = 3  # content words a courteous message may mention ("good luck with the toast")


def is_small_talk(text: str) -> bool:
    """Thanks, greetings and acknowledgements ("Glad it worked!", "Sure, metric from here on"):
    messages about the conversation rather than its subjects, which never make a topic."""
    flat = text.replace("\u2019", "'").strip().lower()
    if "```" in flat or "?" in flat or len(flat.split()) > _SMALL_TALK_WORDS:
        return False
    if not _COURTESY.search(flat):
        return False
    words = {w for w in terms_of(text) if " " not in w}
    return len(words) <= _SMALL_TALK_TERMS


# --- instructions -------------------------------------------------------------------------

_LANGS = (
    "english|french|german|spanish|italian|portuguese|dutch|japanese|chinese|korean|russian|"
    "polish|arabic|hindi|swedish|norwegian|danish|finnish|greek|turkish|ukrainian|czech|hebrew"
)
# A programming language preferred is one for every answer with code ("I prefer TypeScript").
_CODE_LANGS = re.compile(
    r"\b(?:python|typescript|javascript|java|rust|golang|kotlin|ruby|php|haskell|scala|"
    r"powershell|sql|c\+\+|c#)(?!\w)"
)
_LEAD = re.compile(
    r"^(?:(?:ok(?:ay)?|also|and|so|hey|hi|please|pls|kindly|btw|oh|actually|one more thing|"
    r"just)\b[\s,:;.!-]*)+"
)
_REQUEST = re.compile(r"^(?:can|could|would|will) you (?:please )?")
_AFTER_ASK = re.compile(r"(?<=\?)\s")  # "...short? I read these on my phone": the why follows
_QUESTION = re.compile(
    r"^(?:how|what|why|when|where|which|who|whose|is|are|was|were|does|did|do (?:you|i|we)|"
    r"can (?:i|we)|could (?:i|we)|should|shall|would it|isn't|any)\b"
)
_STANDING = re.compile(
    r"\b(?:from now on|going forward|from here on|in (?:the )?future|for the rest of (?:this|the)"
    r" (?:chat|conversation|session)|every time|each time|whenever you|by default|no more|"
    r"remember (?:that|to|i|my)|(?:all|every|any|each) (?:of )?(?:your |the |future )?(?:code|"
    r"examples?|answers?|responses?|replies|snippets?|recipes?|commands?|suggestions?|"
    r"variables?|statistics|future answers?)|throughout|in everything|for everything|"
    r"everything you|unless i say otherwise|for all future|per answer|each answer|in your "
    r"(?:replies|answers|responses|examples|code)|when(?:ever)? you (?:write|edit|suggest|give|"
    r"answer|reply|explain|mention|show))\b"
)
_ALWAYS = re.compile(
    r"^(?:always|never) (?:be|use|answer|reply|respond|write|include|add|give|show|explain|start|"
    r"end|format|talk|speak|say|apologi\w*|mention|ask|assume|put|keep|stay|make|remind|provide|"
    r"cite|check|suggest|recommend|call|link|list|repeat|praise)\b"
)
_FORMAT = re.compile(
    r"\b(?:bullets?|bullet[- ]points?|numbered lists?|markdown|plain text|emojis?|emoticons?|"
    r"jargon|headings?|headers?|tables|disclaimers?|apologi\w*|metric|imperial|celsius|"
    r"fahrenheit|in (?:british |american |simple |plain )?(?:" + _LANGS + r")|"
    r"(?:in|to) (?:one|a single|two|three|a few|\d+(?:[-\u2013]\d+)?) (?:sentences?|paragraphs?|"
    r"lines?|words?)|pounds|dollars|euros|miles|kilometres|kilometers|kilograms|inches|"
    r"(?:under|at most|max(?:imum)?|no more than|fewer than|less than) \d+ (?:words|lines)|"
    r"(?:british|american) (?:english|spelling)|spelling|type hints|code blocks?|semicolons|"
    r"capital letters|lowercase|exclamation marks|oxford comma|24-hour|digits|tl;dr|"
    r"safety warnings|warnings|sources|summar(?:y|ize|ise))\b"
)
_TONE = re.compile(
    r"\b(?:concise|brief|briefer|short|shorter|succinct|terse|detailed|verbose|formal|informal|"
    r"casual|polite|friendly|direct|blunt|simple|simpler|technical|professional|to the point|"
    r"beginner|less detail|more detail|long answers|honest)\b"
)
# Verbs that, said to the assistant at the start of a message, shape every later answer.
_BEHAVIOUR = re.compile(
    r"^(?:assume|stop|quit|skip|avoid|don't|dont|do not|never|always|default to|no need to|"
    r"stick to|stick with|switch to|address me|call me|talk to me|speak to me|treat me|"
    r"use|let's keep|max(?:imum)? \w+ (?:sentences?|lines?|words?|paragraphs?) per)\b"
)
_NOT_BEHAVIOUR = re.compile(
    r"^(?:don't worry|dont worry|do not worry|never mind|stop\s*[-\u2013\u2014,.!]|stop$|"
    r"don't know|"
    r"always (?:a|the)\b|never (?:again|heard)|"
    r"use (?:it|this|that|these|those|the (?:code|function|snippet))\b)"
)
_STYLE_VERB = re.compile(
    r"^(?:be|stay|keep|stop|avoid|don't|dont|do not|no|only|answer|reply|respond|"
    r"talk|speak|format|limit|stick to|switch to|less|more|shorter|longer|prices|write numbers)\b"
)
_TASK_VERB = re.compile(
    r"^(?:use|write|give|show|explain|include|add|make|put|provide|list|link|leave|scale)\b"
)
_RESPONSE = re.compile(
    r"\b(?:your |the )?(?:answers?|responses?|replies|explanations?|recipes?|examples?|"
    r"commands?|code|suggestions?|voice|critiques?|things)\b"
)
_PREFERENCE = re.compile(r"^(?:(i(?: prefer| would prefer|'d prefer))|call me|my name is)\b")
_WANT = re.compile(r"^i(?: want|'d like| would like) you to ")
# Said for one answer only: "in French this time", "for this recipe: 2 cups…", "this one".
_ONE_OFF = re.compile(
    r"\b(?:this time|just this|right now|the following|below|to my \w+|as before|from earlier|"
    r"you wrote|(?:this|that|these|those) "
    r"(?!chat|conversation|session|is|was|i|you|it|we|they)\w+)\b|"
    r"\bthere[.!]?$|:\s*\S+(?:\s+\S+){2,}"
)
# "I'm vegetarian, so keep all recipes meat-free": a fact, then what follows from it.
_BECAUSE = re.compile(
    r"^(?:i'm|i am|i have|i cook|i live|i work|we're|we are|we live|we work)\b[^,]*, (?:so|please) "
)
# "We're on Java 17, please write code for that": the fact is where the user works.
_SETUP = re.compile(r"^(?:i'm|i am|we're|we are) (?:on|using|running)\b[^,]*, (?:so |please )?")
# "no brand names, just generic products": what to leave out of every answer
_INSTEAD = re.compile(r"^no (?!worries|problems|thanks)[a-z' -]+s, (?:just|only) ")
# Weak marks of a standing wish: with nothing else they say "there's a tool for everything".
_WEAK_STANDING = re.compile(r"\b(?:in everything|for everything|everything you|throughout)\b")


# A message that asks something and says how to answer from now on ("Please keep answers short.
# What's a good first houseplant?"): short, in sentences, the wish first or last.
# (a dash between the wish and the question parts them too: "keep answers short - what's a good
# first houseplant?"; a comma does not: "the office is closed from now on, how do I...")
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\s+[-\u2013\u2014]+\s+")
_MIXED_WORDS = 40
_THIS_ANSWER = re.compile(r"\b(?:it|this)\b")  # "keep it short": the answer asked for now
# Beside a question or a task, a wish holds beyond it only when it says so: answers in the
# plural, "always"/"from now on", or what never to put in one ("no emojis please"). "Be brief.",
# "Use bullet points." or "Answer in one word." beside a task are for that task.
_ANSWERS = re.compile(r"\b(?:answers|responses|replies)\b")
_PROHIBITION = re.compile(r"^(?:no|don't|do not|avoid|stop)\b")


def is_instruction(text: str, role: str = "user") -> bool:
    """True for a short standing instruction or preference from the user, alone or said with
    a question.

    "be concise", "always answer in French", "use Python 3.12 from now on", "don't use
    emojis", "I'm on a Mac, so give me macOS commands from here on", "we're on Java 17, please
    write code for that", "no brand names, just generic products" are, and so is "Please keep
    answers short. What's a good first houseplant?"; "thanks", questions ("how do I use
    asyncio?"), one-off tasks ("write a short poem. Keep it simple."), requests for this answer
    only ("in French this time"), long messages and anything not said by the user are not.
    """
    if role != "user":
        return False
    t = _plain(text)
    return _says_instruction(t) or _says_one_among_others(t)


def is_whole_instruction(text: str) -> bool:
    """Whether the whole of ``text`` is a standing instruction: :func:`is_instruction` without
    the wish said beside a question (the benchmarks print the two apart)."""
    return _says_instruction(_plain(text))


def _plain(text: str) -> str:
    """Lowercased, spaces collapsed, the typographic apostrophe phones type made plain."""
    return " ".join(text.replace("\u2019", "'").lower().split())


def _says_one_among_others(t: str) -> bool:
    """A short message of several sentences whose first or last is a standing instruction."""
    if len(t.split()) > _MIXED_WORDS:
        return False
    parts = _SENTENCES.split(t)
    if len(parts) < 2:
        return False
    return any(_about_answers(p) and _says_instruction(p) for p in (parts[0], parts[-1]))


def _about_answers(t: str) -> bool:
    """Whether a sentence said beside another speaks of how to answer from now on (beside a
    question, "I would prefer a moderate price", "let's keep looking" or "be brief" is about
    the task at hand)."""
    if _THIS_ANSWER.search(t):
        return False
    said = _LEAD.sub("", t)
    never = _PROHIBITION.match(said) and (_FORMAT.search(t) or _RESPONSE.search(t))
    return bool(_STANDING.search(t) or _ANSWERS.search(t) or _ALWAYS.match(said) or never)


def _says_instruction(t: str) -> bool:
    """:func:`is_instruction` of a whole user message, lowercased, spaces collapsed."""
    if not t or len(t) > 220 or len(t.split()) > 30 or is_trivial(t):
        return False
    t = _LEAD.sub("", t)
    setup = _SETUP.match(t)
    fact = setup or _BECAUSE.match(t)
    if fact:
        t = t[fact.end() :]
    request = _REQUEST.match(t) or _WANT.match(t)
    if request:  # "can you keep it short? I read these on my phone": the ask is what counts
        t = _AFTER_ASK.split(t[request.end() :], maxsplit=1)[0]
    elif t.endswith("?") or _QUESTION.match(t):
        return False
    if setup and (_TASK_VERB.match(t) or _BEHAVIOUR.match(t)) and _RESPONSE.search(t):
        return True  # "...please write code for that": "that" is the setup, not this answer
    if _ONE_OFF.search(t) or _NOT_BEHAVIOUR.match(t):
        return False
    standing, fmt, tone = bool(_STANDING.search(t)), bool(_FORMAT.search(t)), bool(_TONE.search(t))
    preference = _PREFERENCE.match(t)
    if preference and preference.group(1) is None:  # "call me Sam", "my name is Sam"
        return True
    if preference:  # "I prefer metric units": of the answers; "I prefer Redwood City": the task's
        return standing or fmt or tone or bool(_RESPONSE.search(t) or _CODE_LANGS.search(t))
    if _ALWAYS.match(t) or (_BEHAVIOUR.match(t) and not request):
        return True
    if _INSTEAD.match(t):
        return True
    if _STYLE_VERB.match(t):
        return standing or fmt or tone or bool(_RESPONSE.search(t))
    if _TASK_VERB.match(t):  # "write a short poem" is a task, "write in French" a preference
        return standing or fmt or (tone and bool(_RESPONSE.search(t)))
    strong = bool(_STANDING.search(_WEAK_STANDING.sub("", t)))
    return strong or (bool(_RESPONSE.match(t)) and (fmt or tone)) or bool(fact and fmt)
