"""Deterministic long labelled chats for a retrieval-recall benchmark.

Run: PYTHONPATH=. python benchmarks/long_chats.py  (writes benchmarks/data/long_chats.json)

A person chats with an assistant over weeks about many interleaved subjects (baking, cooking, a
renovation, renting, a Python project, travel, a garden, money, a job search, fitness, a novel,
a car, a pet). Facts are planted in the first 60% of the chat (one user message, the assistant's
reply, or both); the same entities come back many times in distractor messages (some with a
different number for a different thing); questions asked at the end each name the exact messages
that hold the answer. Kinds: ``lexical`` (shares distinctive words with the answer),
``paraphrase`` (at most one content word in common), ``multi`` (2-3 facts planted in different
places) and ``temporal`` (the first or the latest of several attempts at a problem).

Each question also carries ``entities``: the strings that identify its subject, which the
distractors repeat (not needed by a retriever; used by the tests and for error analysis).
Only the standard library; ``random.Random(seed)`` everywhere, so a seed gives the same chats.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KIND_SHARES = {"lexical": 0.40, "paraphrase": 0.35, "multi": 0.15, "temporal": 0.10}
QUESTIONS_PER_1000 = 44
FACT_ZONE = 0.6  # facts and attempts are planted in this leading share of the chat

STOPWORDS = frozenset(
    [
        "about",
        "after",
        "again",
        "also",
        "been",
        "before",
        "being",
        "could",
        "does",
        "doing",
        "done",
        "from",
        "have",
        "here",
        "into",
        "just",
        "know",
        "like",
        "made",
        "make",
        "many",
        "more",
        "most",
        "much",
        "need",
        "only",
        "over",
        "same",
        "some",
        "still",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "very",
        "want",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "will",
        "with",
        "would",
        "your",
        "yours",
        "mine",
        "the",
        "and",
        "for",
        "you",
        "are",
        "was",
        "did",
        "had",
        "has",
        "how",
        "who",
        "why",
        "can",
        "any",
        "our",
        "out",
        "its",
    ]
)


def content_words(text: str) -> set[str]:
    """Words of 4+ letters, lowercased, a plural 's' dropped, stopwords removed."""
    words = set()
    for word in re.findall(r"[a-z]+", text.lower()):
        if len(word) >= 4 and word not in STOPWORDS:
            words.add(word[:-1] if word.endswith("s") and len(word) > 4 else word)
    return words - STOPWORDS


# ----------------------------------------------------------------------------- slot fillers

FIRST_NAMES = [
    "Amara",
    "Bruno",
    "Chiara",
    "Dmitri",
    "Elif",
    "Farid",
    "Greta",
    "Hiro",
    "Ines",
    "Jonas",
    "Kemi",
    "Luca",
    "Maren",
    "Nadia",
    "Oskar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sanjay",
    "Tove",
    "Umar",
    "Vera",
    "Wiktor",
    "Ximena",
    "Yusuf",
    "Zofia",
    "Anouk",
    "Bastian",
    "Carmen",
    "Dorota",
    "Emeka",
    "Flavia",
    "Gustav",
    "Halima",
    "Ivo",
    "Jasmin",
    "Kofi",
    "Lena",
    "Matteo",
    "Noor",
]
SURNAMES = [
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Castellano",
    "Brandt",
    "Nakamura",
    "Petrov",
    "Haddad",
    "Fernandes",
    "Kowalski",
    "Ricci",
    "Osei",
    "Van",
    "Dijk",
    "Svensson",
    "Duarte",
    "Keller",
    "Mensah",
    "Novak",
    "Ibrahim",
    "Larsen",
]
PLACES = [
    "Lisbon",
    "Kyoto",
    "Oslo",
    "Marrakesh",
    "Edinburgh",
    "Tbilisi",
    "Porto",
    "Ljubljana",
    "Seville",
    "Tallinn",
    "Bergen",
    "Valletta",
    "Krakow",
    "Palermo",
    "Bruges",
    "Salzburg",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
SHOPS = [
    "Hornbach",
    "Bauhaus",
    "Leroy",
    "IKEA",
    "Decathlon",
    "Lidl",
    "Aldi",
    "Rossmann",
    "MediaMarkt",
    "Obi",
]
PRODUCTS = """a cordless drill|a cast-iron pan|a moisture meter|a kitchen scale|a foam roller|a
torque wrench|a proofing basket|a label printer|a soil thermometer|a standing desk|a USB-C hub|a
bike pump|a pressure cooker|an orbital sander|a rain gauge|a kettlebell""".replace("\n", " ").split(
    "|"
)
IDENTIFIERS = [
    "load_config",
    "parse_rows",
    "sync_items",
    "retry_call",
    "build_index",
    "flush_cache",
    "fetch_page",
    "merge_batches",
    "read_token",
    "score_items",
    "split_chunks",
    "render_view",
]


def date_str(rng: random.Random) -> str:
    return f"{rng.randint(1, 28)} {rng.choice(MONTHS)}"


# ----------------------------------------------------------------------------- subjects
# Each subject: sub-topics (a stretch stays on one), user and assistant sentences for ordinary
# messages. Slots: {t} sub-topic, {n} small number, {m} bigger number, {d} date, {w} weekday,
# {name} person, {place}, {shop}, {prod} product, {fn} identifier.

SUBJECTS: dict[str, dict[str, list[str]]] = {
    "baking": {
        "topics": ["the starter", "the oven", "scoring", "the crumb", "cold proofing", "the crust"],
        "user": [
            "I've been fiddling with {t} again this week.",
            "Something is off with {t}, the last bake was disappointing.",
            "My flatmate {name} asked me how I handle {t}.",
            "I bought {prod} at {shop} mostly because of {t}.",
            "Yesterday I spent about {n} hours on {t} and I'm still not happy.",
            "Do you think {t} matters more than the flour I use?",
            "I read a forum thread claiming {t} is overrated for home bakers.",
        ],
        "assistant": [
            "With {t}, small changes compound, so change one variable per bake.",
            "Keep notes on {t}: time, room temperature and how the dough felt.",
            "Most home bakers underestimate how much {t} depends on kitchen temperature.",
            "If {t} keeps misbehaving, try a bake where you only watch that step.",
            "A cheap thermometer tells you more about {t} than any recipe does.",
            "I'd give it {n} more bakes before deciding {t} is the culprit.",
        ],
    },
    "cooking": {
        "topics": [
            "the dinner party",
            "meal prep",
            "the lentil stew",
            "weeknight dinners",
            "the new wok",
            "the spice drawer",
        ],
        "user": [
            "Planning {t} again, I want something that feeds {n} people.",
            "I keep running out of ideas for {t}.",
            "{name} suggested I try a Georgian dish for {t}.",
            "I finally used {prod} for {t} and it was worth it.",
            "How far ahead can I get {t} done without it tasting tired?",
            "The shopping for {t} came to {m} euros, which felt like a lot.",
        ],
        "assistant": [
            "For {t}, batch the chopping the evening before and keep it in tubs.",
            "A sharp acid at the end rescues most dishes in {t}.",
            "Plan {t} around one dish that can sit in a low oven for an hour.",
            "Roughly {n} dishes is plenty for {t}; more just means more washing up.",
            "Taste as you go; {t} rarely needs as much salt as recipes say.",
        ],
    },
    "renovation": {
        "topics": [
            "the kitchen",
            "the hallway",
            "the bathroom",
            "the floorboards",
            "the window frames",
            "the loft",
        ],
        "user": [
            "Work on {t} is dragging, we lost another {n} days this month.",
            "I picked up {prod} from {shop} for {t}.",
            "The builder says {t} needs a second look before anything gets fixed.",
            "Spent the whole {w} sanding in {t}, my arms are dead.",
            "My sister {name} thinks we are overspending on {t}.",
            "Should I do {t} myself or pay someone?",
        ],
        "assistant": [
            "For {t}, prep is most of the job: fill, sand, clean, then prime.",
            "Get two more quotes before committing to anything on {t}.",
            "Doing {t} yourself saves money but budget about {n} weekends for it.",
            "Photograph {t} before closing walls up, it saves pain later.",
            "Ventilation matters a lot in {t}, keep a window cracked while things dry.",
        ],
    },
    "renting": {
        "topics": [
            "the flat",
            "the boiler",
            "the neighbours",
            "the rent increase",
            "the balcony",
            "the heating bill",
        ],
        "user": [
            "Another thing about {t}: it's been bothering me for {n} weeks.",
            "I'm not sure how to raise {t} politely.",
            "My friend {name} had the same issue with {t} in her place.",
            "The building chat was full of complaints about {t} this {w}.",
            "I paid {m} euros extra this quarter because of {t}.",
        ],
        "assistant": [
            "Put anything about {t} in writing so there is a record with dates.",
            "Check what the contract says about {t} before you bring it up.",
            "A calm, specific message about {t} usually works better than a long one.",
            "Keep photos and receipts related to {t} in one folder.",
        ],
    },
    "python": {
        "topics": [
            "the sync worker",
            "the test suite",
            "the CLI",
            "the database layer",
            "the CI pipeline",
            "the config loader",
        ],
        "user": [
            "Back on the side project: {t} is slow again, about {n} seconds per run.",
            "I refactored {t} so {fn} is its own function now.",
            "{name} from the meetup reviewed {t} and left {n} comments.",
            "Is it worth adding type hints to {t} this late?",
            "{t} crashed overnight with a KeyError inside {fn}.",
            "I want to split {t} into smaller modules before it grows more.",
        ],
        "assistant": [
            "For {t}, profile first; the slow part is rarely where it feels like it is.",
            "Make {fn} pure and {t} becomes much easier to test.",
            "Adding type hints to {t} gradually is fine; start at the module boundaries.",
            "A small regression test around {fn} would stop that from coming back in {t}.",
            "Keep {t} boring: explicit arguments, no hidden globals.",
        ],
    },
    "travel": {
        "topics": [
            "the autumn trip",
            "the rail pass",
            "the packing list",
            "the itinerary",
            "the day trips",
            "travel insurance",
        ],
        "user": [
            "Thinking about {t} again, maybe we add {place} to it.",
            "{name} says {t} is too ambitious for {n} days.",
            "I got {prod} for {t}, not sure I'll need it.",
            "Prices for {t} keep moving, now around {m} euros.",
            "Can you help me cut {t} down to something relaxed?",
        ],
        "assistant": [
            "For {t}, leave at least one empty day; something always overruns.",
            "Trains between cities make {t} easier than flying for distances like that.",
            "I'd drop one city from {t} rather than rush all of them.",
            "Book the fixed parts of {t} first and keep the rest flexible.",
        ],
    },
    "garden": {
        "topics": [
            "the raised beds",
            "the compost",
            "watering",
            "the fruit trees",
            "the seed trays",
            "the herb corner",
        ],
        "user": [
            "Out in the garden this morning, {t} needs attention.",
            "The neighbour {name} gave me advice on {t} over the fence.",
            "We had {n} days without rain and {t} shows it.",
            "I bought {prod} at {shop}, mostly for {t}.",
            "What should I do with {t} before the weather turns?",
        ],
        "assistant": [
            "Mulch helps {t} more than extra watering does.",
            "For {t}, early morning is the best time to work.",
            "Give {t} a thorough soak once a week rather than a sprinkle every day.",
            "Keep a little notebook on {t}: what you did and what happened.",
        ],
    },
    "finance": {
        "topics": [
            "the budget spreadsheet",
            "the emergency fund",
            "the pension",
            "subscriptions",
            "the tax return",
            "the credit card",
        ],
        "user": [
            "Went through {t} last night, took me {n} hours.",
            "I think {t} is where money quietly leaks away.",
            "{name} recommended an app for {t}, is it any good?",
            "Should I automate {t} or keep doing it by hand?",
            "Found {m} euros I had forgotten about while sorting {t}.",
        ],
        "assistant": [
            "Automating {t} removes the temptation to skip a month.",
            "Review {t} quarterly; monthly is too noisy to see trends.",
            "For {t}, simple categories beat detailed ones you never maintain.",
            "Keep {t} separate from day-to-day spending so it doesn't get nibbled.",
        ],
    },
    "jobs": {
        "topics": [
            "my CV",
            "the cover letters",
            "the portfolio",
            "LinkedIn",
            "the take-home task",
            "networking",
        ],
        "user": [
            "Spent the evening on {t}, it still reads flat to me.",
            "{name}, a former colleague, offered to look at {t}.",
            "I've sent {n} applications this week and {t} still worries me.",
            "Is {t} worth much effort, or do recruiters barely look?",
            "I want to rework {t} before the next round of applications.",
        ],
        "assistant": [
            "For {t}, lead with outcomes and numbers rather than duties.",
            "Tailor {t} to each role; a generic version gets skimmed.",
            "Ask {name} for blunt feedback on {t}, polite feedback is useless.",
            "Keep {t} to what you'd happily talk about in an interview.",
        ],
    },
    "fitness": {
        "topics": [
            "the running plan",
            "leg day",
            "stretching",
            "the gym routine",
            "sleep",
            "the rowing machine",
        ],
        "user": [
            "Did {t} today, felt heavier than usual.",
            "My training partner {name} wants to change {t}.",
            "I skipped {t} for {n} days, feeling guilty.",
            "Do I need {prod} for {t}, or is that marketing?",
            "How do I keep {t} going when work gets busy?",
        ],
        "assistant": [
            "Consistency with {t} beats intensity; a short session still counts.",
            "Log {t} so you can see progress on the bad days.",
            "If {t} feels heavy, deload for a week and come back.",
            "Schedule {t} like a meeting, it's easier to protect that way.",
        ],
    },
    "novel": {
        "topics": [
            "chapter three",
            "the prologue",
            "the villain's motive",
            "the ending",
            "the pacing",
            "the dialogue",
        ],
        "user": [
            "Wrote about {n} hundred words on {t} tonight.",
            "My writing group, mainly {name}, didn't buy {t}.",
            "I'm stuck on {t}, every version feels thin.",
            "Should I cut {t} entirely and see if anyone misses it?",
            "Reread {t} this morning and winced a little.",
        ],
        "assistant": [
            "For {t}, ask what the character wants in the scene and what stops them.",
            "Try writing {t} from a different point of view just as an exercise.",
            "If {t} feels thin, it may need a concrete object or place to anchor it.",
            "Read {t} aloud; clunky lines show up immediately.",
        ],
    },
    "car": {
        "topics": [
            "the Jeep",
            "the tyres",
            "the MOT",
            "the service book",
            "the wipers",
            "the dashboard lights",
        ],
        "user": [
            "The car again: {t} is acting up.",
            "{name} at work says I should sell the car before {t} gets expensive.",
            "I drove {m} kilometres last month and {t} is showing it.",
            "Picked up {prod} for {t} at {shop}.",
            "Is {t} something I can check myself in the driveway?",
        ],
        "assistant": [
            "For {t}, check the simple things first: fluids, fuses, connections.",
            "Keep receipts for {t}, they help the resale value.",
            "A second opinion on {t} is cheap compared with the repair.",
            "Note when {t} happens: cold start, speed, after rain.",
        ],
    },
    "pets": {
        "topics": [
            "the walks",
            "the vet visits",
            "the new harness",
            "the food bowl",
            "the training",
            "the pet insurance",
        ],
        "user": [
            "Quick pet update: {t} went badly this morning.",
            "{name} next door offered to help with {t}.",
            "I spent {m} euros on {t} this month, which is silly.",
            "Any tips for {t} with an anxious animal?",
            "We managed {t} for {n} days in a row now.",
        ],
        "assistant": [
            "For {t}, short calm sessions work better than long ones.",
            "Reward the small wins during {t}, consistency matters most.",
            "Keep {t} at the same time every day if you can.",
            "If {t} stays stressful, ask the vet for a behaviourist.",
        ],
    },
}

# Generic sentences that make messages longer without adding subject words.
USER_OPENERS = [
    "Hey, quick one.",
    "Morning!",
    "Okay, different topic.",
    "Back again.",
    "Right, so.",
    "Sorry for the wall of text.",
    "Evening.",
    "Small update.",
    "",
]
USER_CLOSERS = [
    "What do you think?",
    "Any ideas?",
    "Does that sound reasonable?",
    "Not urgent.",
    "Curious what you'd do.",
    "I'll report back.",
    "",
]
ASSISTANT_OPENERS = [
    "Good question.",
    "That makes sense.",
    "Sounds like progress.",
    "Understandable.",
    "Fair enough.",
    "Happy to help with that.",
    "",
]
ASSISTANT_CLOSERS = [
    "Let me know how it goes.",
    "Tell me what you find.",
    "We can adjust later if needed.",
    "Keep me posted.",
    "",
]
SMALL_TALK = [
    ("thanks!", "You're welcome!"),
    ("ok", "Great."),
    ("cool, thanks", "Any time."),
    ("haha fair", "Glad that helped."),
    ("got it", "Perfect."),
    ("ok will do", "Good luck!"),
]
INSTRUCTIONS = [
    (
        "Please always answer in metric units from now on, I never think in inches or pounds.",
        "Understood, metric units only from here on.",
    ),
    (
        "A standing request: keep answers short unless I ask for detail, bullet points are fine.",
        "Noted, I'll keep answers short and use bullet points where it helps.",
    ),
    (
        "From now on, when you suggest a recipe, give weights in grams rather than cups, please.",
        "Will do, weights in grams from now on.",
    ),
    (
        "Please don't suggest paid apps or subscriptions unless I ask, I have too many already.",
        "Got it, free options first and no subscriptions unless you ask.",
    ),
    (
        "Whenever you write Python for me, use type hints and keep functions under twenty lines.",
        "Understood, type hints and short functions in every code snippet.",
    ),
]
# Generic lead and tail sentences for fact and distractor messages.
LEADS = [
    "Quick note before I forget.",
    "One more thing.",
    "For the record.",
    "A small update.",
    "Okay, writing this down.",
    "So, news.",
    "Small detail, but important.",
]
TAILS = [
    "Just so it's written down somewhere.",
    "Remind me later if I forget.",
    "Anyway, back to the rest.",
    "That's settled then.",
    "Moving on.",
    "Let's not revisit it.",
]
CONFIRMS = [
    "Noted, I'll keep that in mind.",
    "Got it, thanks for telling me.",
    "Good to know, I'll remember it.",
    "Okay, noted for later.",
    "Thanks, that's useful context.",
]


# ----------------------------------------------------------------------------- facts
# A fact type: keys (one fact per key per chat), a value maker, the user statement and the
# assistant reply (each may hold the value: the answers are whichever do), question phrasings,
# the entities that identify it, and distractors that repeat the key without the value.


@dataclass
class FactType:
    subject: str
    name: str
    keys: list[str]
    value: Callable[[random.Random], str]
    user: list[str]
    assistant: list[str]
    lexical: list[str]
    paraphrase: list[str]
    multi: str
    entities: list[str]
    distractors: list[str]


def _pct(rng: random.Random) -> str:
    return f"{rng.randint(60, 84)}%"


def _euros(lo: int, hi: int, step: int) -> Callable[[random.Random], str]:
    return lambda rng: f"{rng.randrange(lo, hi, step)} euros"


def _ip(rng: random.Random) -> str:
    port = rng.choice([8443, 8080, 9000, 5432, 2222, 8000, 7443])
    return f"10.{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(2, 250)}:{port}"


def _version(rng: random.Random) -> str:
    return f"{rng.randint(1, 4)}.{rng.randint(0, 29)}.{rng.randint(0, 9)}"


def _kg(rng: random.Random) -> str:
    return f"{rng.randrange(40, 180, 5)} kg"


def _grams(rng: random.Random) -> str:
    return f"{rng.randrange(80, 400, 10)} grams"


PAINTS = [
    "Hague Blue",
    "Setting Plaster",
    "Pigeon Grey",
    "Mizzle",
    "Railings Black",
    "Lulworth Blue",
    "Cinder Rose",
    "Sulking Room Pink",
    "Studio Green",
    "Pale Powder",
    "Oval Room Blue",
    "India Yellow",
    "Card Room Green",
    "Skimming Stone",
]
HOTELS = [
    "Casa Azul",
    "the Harbour Inn",
    "Pension Lumen",
    "the Old Granary",
    "Hotel Miradouro",
    "the Linden House",
    "Riad Zitoun",
    "the Copper Kettle",
    "Hostal Alameda",
    "the Fjordview",
]
ALLERGENS = [
    "cashews",
    "sesame",
    "shellfish",
    "celery",
    "mustard",
    "lupin",
    "kiwi",
    "buckwheat",
    "hazelnuts",
    "egg",
]
JOBS = [
    "lighthouse keeper",
    "customs officer",
    "piano tuner",
    "night-shift radiographer",
    "ferry captain",
    "bookbinder",
    "tram driver",
    "beekeeper",
    "locksmith",
    "cartographer",
]
GARAGES = [
    "Dario's garage",
    "Autohaus Brenner",
    "Kwik Motors",
    "the Fernandes workshop",
    "Garage Lumière",
    "Miller & Sons",
]


def _pick(options: list[str]) -> Callable[[random.Random], str]:
    return lambda rng: rng.choice(options)


FACT_TYPES: list[FactType] = [
    FactType(
        "baking",
        "hydration",
        [
            "rye",
            "spelt",
            "focaccia",
            "ciabatta",
            "brioche",
            "baguette",
            "challah",
            "pretzel",
            "pumpernickel",
        ],
        _pct,
        [
            "Decision time on the {k}: I'm locking it at {v} hydration from now on.",
            "After the last test bake I settled the {k} at {v} hydration.",
        ],
        [
            "Agreed, {v} hydration for the {k} it is.",
            "{v} hydration is sensible for the {k}.",
            "CONFIRM",
        ],
        [
            "What hydration did we settle on for the {k}?",
            "Which hydration percentage did I lock in for the {k}?",
        ],
        [
            "How much water, relative to flour weight, goes into my {k} now?",
            "For the {k}, how wet did I choose to make the mix?",
        ],
        "What hydration did we settle on for the {ks}?",
        ["{k}"],
        [
            "The {k} came out with a pale crust, next time I'll bake it at {n}0 degrees.",
            "My neighbour {name} loved the {k} I gave her on {w}.",
            "I bought a new banneton for the {k}, the old one was {n} centimetres too small.",
            "The {k} needed {n}5 minutes in the oven, a bit longer than the recipe says.",
            "Thinking of adding seeds to the {k} next weekend, maybe {n}0 grams.",
        ],
    ),
    FactType(
        "cooking",
        "allergy",
        [],
        _pick(ALLERGENS),
        [
            "For the dinner planning: {k} has an allergy to {v}, properly, with an EpiPen.",
            "Important for the menu, {k} has a serious {v} allergy.",
        ],
        ["Understood, no {v} anywhere near {k}'s food.", "CONFIRM"],
        ["What allergy does {k} have?", "Which allergy should I remember for {k}?"],
        [
            "Which ingredient must never end up on {k}'s plate?",
            "What should I keep off the table when I cook for {k}?",
        ],
        "What allergies do {ks} have?",
        ["{k}"],
        [
            "{k} is coming over on {w} and bringing dessert.",
            "{k} asked for the recipe of the lentil stew from last time.",
            "{k} said the soup was the best thing I made this year.",
            "I'm seating {k} next to {name} at the dinner party.",
            "{k} can only stay until {n} o'clock on the evening of the party.",
        ],
    ),
    FactType(
        "renovation",
        "paint",
        ["kitchen", "hallway", "bedroom", "bathroom", "study", "landing", "nursery"],
        _pick(PAINTS),
        [
            "Final answer on the {k} walls: {v}. I ordered the tins today.",
            "We are going with {v} for the {k} walls, no more sample pots.",
        ],
        ["{v} will look lovely in the {k}.", "Good choice, {v} suits the {k} light.", "CONFIRM"],
        [
            "Which paint colour did we choose for the {k} walls?",
            "What paint is going on the {k} walls?",
        ],
        [
            "What shade did I pick for the {k}?",
            "In the {k}, what will the room end up looking like colour-wise?",
        ],
        "Which paint colours did we choose for the {ks} walls?",
        ["{k}"],
        [
            "The {k} skirting boards need another {n} metres of timber.",
            "The electrician is rewiring the {k} on {d}.",
            "I found old newspapers from the fifties under the {k} floor.",
            "The {k} door sticks again, probably the humidity.",
            "Tiles for the {k} are backordered until {d}.",
        ],
    ),
    FactType(
        "renovation",
        "quote",
        ["plumber", "tiler", "electrician", "roofer", "plasterer", "carpenter", "glazier"],
        _euros(600, 4800, 20),
        [
            "The {k} came round and quoted {v} for the whole job, materials included.",
            "Got the {k}'s quote at last: {v} all in.",
        ],
        ["{v} from the {k} is within what we budgeted.", "CONFIRM"],
        ["How much did the {k} quote for the whole job?", "What was the {k}'s quote?"],
        ["What would it cost me to hire the {k}?", "What price did the {k} give me?"],
        "What did the {ks} quote?",
        ["{k}"],
        [
            "The {k} can only start on {d}, which pushes everything back.",
            "The {k} said a small extra part would add {n}0 euros on top.",
            "The {k} left his ladder in the hallway over the weekend.",
            "I called the {k} twice on {w} and nobody picked up.",
            "The {k} recommended a supplier near {shop}.",
        ],
    ),
    FactType(
        "renting",
        "landlord",
        ["landlord"],
        lambda rng: f"Mrs. {rng.choice(SURNAMES)}",
        [
            "By the way, the landlord is {v}, she lives on the ground floor of our building.",
            "The landlord, {v}, came by today to introduce herself properly.",
        ],
        ["Good to know the landlord is {v}.", "CONFIRM"],
        ["What is my landlord called?", "What's the landlord's name?"],
        ["Who owns the flat I rent?", "Whose property is the apartment where I live?"],
        "",
        ["landlord"],
        [
            "The landlord wants to inspect the radiators on {d}.",
            "I emailed the landlord about the boiler again, no reply yet.",
            "The landlord says the rent goes up by {n}% next year.",
            "The landlord left a note about the bins on {w}.",
            "The landlord finally agreed to fix the balcony railing.",
        ],
    ),
    FactType(
        "renting",
        "lease",
        ["lease"],
        date_str,
        [
            "Checked the paperwork: the lease runs out on {v}, so I have to decide soon.",
            "Reminder for myself, the current lease ends on {v}.",
        ],
        ["So the lease ends on {v}, noted.", "CONFIRM"],
        ["When does my lease end?", "What date does the lease run out?"],
        [
            "Until what date am I allowed to stay in the flat under my current contract?",
            "How long can I keep living in this apartment before signing again?",
        ],
        "",
        ["lease"],
        [
            "The lease says no pets bigger than a cat, which is awkward.",
            "I re-read the lease, the notice period is {n} weeks.",
            "A friend's lease has a clause about repainting, mine doesn't.",
            "The lease mentions a garden share I never knew about.",
            "The lease renewal form is {n} pages long.",
        ],
    ),
    FactType(
        "python",
        "server",
        ["staging", "production", "metrics", "backup", "builder", "mailer", "gateway"],
        _ip,
        [
            "Infra note: the {k} box is at {v} now, after the migration.",
            "For later, {k} moved and is reachable at {v}.",
        ],
        ["Okay, {k} at {v}, I'll use that in the deploy script.", "CONFIRM"],
        [
            "What is the address and port of the {k} box?",
            "Where is the {k} box reachable after the migration?",
        ],
        [
            "Which IP should I point ssh to when I need {k}?",
            "How do I get onto {k}, which host and number?",
        ],
        "What are the addresses of the {ks} boxes?",
        ["{k}"],
        [
            "The {k} box ran out of disk again, only {n} GB free.",
            "I rebooted {k} after the kernel update on {w}.",
            "Logs on {k} are rotating every {n} hours now.",
            "The {k} deploy took {n} minutes longer than usual today.",
            "Someone left a debug flag on in {k}, fixed it this morning.",
        ],
    ),
    FactType(
        "python",
        "pin",
        ["requests", "pydantic", "sqlalchemy", "httpx", "numpy", "pytest", "polars", "alembic"],
        _version,
        [
            "We pinned {k} to {v} because the newest release broke {fn}.",
            "Pinning {k} at {v} in the lock file until the upstream fix lands.",
        ],
        ["Good call, {k} {v} stays pinned.", "CONFIRM"],
        ["Which version of {k} did we pin?", "What is {k} pinned to?"],
        ["Which {k} number are we stuck on for now?", "Which {k} do we hold back to?"],
        "Which versions of {ks} did we pin?",
        ["{k}"],
        [
            "{k} printed a deprecation warning in the tests of {fn}.",
            "The {k} changelog mentions a fix in {n}.{n}.0, not sure it's ours.",
            "I read the {k} docs for an hour trying to understand the new API.",
            "Importing {k} adds {n}00 ms to startup, annoying.",
            "{name} opened an issue on {k} that looks like our bug.",
        ],
    ),
    FactType(
        "travel",
        "hotel",
        ["Lisbon", "Kyoto", "Oslo", "Edinburgh", "Tbilisi", "Porto", "Seville", "Tallinn"],
        _pick(HOTELS),
        [
            "Booked! In {k} we're staying at {v}, free cancellation until the week before.",
            "Accommodation sorted for {k}: {v}, near the old town.",
        ],
        ["{v} in {k} sounds lovely.", "CONFIRM"],
        ["Which hotel did we book in {k}?", "Where are we staying in {k}, which accommodation?"],
        [
            "Where will I sleep when I'm in {k}?",
            "What's the name of the place I reserved for the nights in {k}?",
        ],
        "Which hotels did we book in {ks}?",
        ["{k}"],
        [
            "Flights to {k} went up to {n}00 euros overnight.",
            "The main museum in {k} is closed on {w}s.",
            "{name} says the food market in {k} is worth a morning.",
            "The train from {k} to the coast takes about {n} hours.",
            "Weather in {k} looks rainy for the first days.",
        ],
    ),
    FactType(
        "garden",
        "planting",
        [
            "tomatoes",
            "courgettes",
            "dahlias",
            "garlic",
            "beans",
            "lettuce",
            "leeks",
            "sunflowers",
            "spinach",
            "peas",
        ],
        date_str,
        [
            "Garden log: the {k} went into the raised bed on {v}.",
            "Noting it down, the {k} were put in the ground on {v}.",
        ],
        ["{v} for the {k}, I'll remember.", "CONFIRM"],
        [
            "When did the {k} go into the raised bed?",
            "On what date were the {k} put in the ground?",
        ],
        ["What day did I plant the {k}?", "Since when have my {k} been growing outside?"],
        "When did the {ks} go in?",
        ["{k}"],
        [
            "The {k} leaves look yellow after all the rain.",
            "Slugs got {n} of the {k} seedlings overnight.",
            "{name} over the fence says her {k} are already flowering.",
            "I need to stake the {k} before the wind on {w}.",
            "Watered the {k} twice today, the soil was bone dry.",
        ],
    ),
    FactType(
        "finance",
        "budget",
        [
            "groceries",
            "transport",
            "restaurants",
            "hobbies",
            "clothing",
            "gifts",
            "utilities",
            "books",
        ],
        _euros(40, 700, 10),
        [
            "New rule: the monthly {k} budget is {v}, starting this month.",
            "We agreed on a cap of {v} a month for {k}.",
        ],
        ["{v} a month for {k} is realistic.", "CONFIRM"],
        ["What monthly budget did we set for {k}?", "What is the monthly cap for {k}?"],
        [
            "How much am I allowed to spend on {k} each month?",
            "What's the most I should put toward {k} in thirty days?",
        ],
        "What monthly budgets did we set for {ks}?",
        ["{k}"],
        [
            "{k} came to {n}00 euros last month, way over.",
            "I want to track {k} in a separate column from now on.",
            "{name} spends half of what I spend on {k}, apparently.",
            "Receipts for {k} are piling up in a drawer.",
            "The bank app lumps {k} together with everything else.",
        ],
    ),
    FactType(
        "jobs",
        "interview",
        [
            "Northwind",
            "Helixa",
            "Tessaro",
            "Brightline",
            "Quanta",
            "Ostara",
            "Meridian",
            "Volantis",
        ],
        date_str,
        [
            "Exciting: the final interview at {k} is on {v}, in person.",
            "{k} confirmed the final round, it's on {v}.",
        ],
        ["Great, {k} on {v}, we'll prepare.", "CONFIRM"],
        ["When is the final interview at {k}?", "What date is the final round with {k}?"],
        [
            "What day do I meet {k} for the last step?",
            "On which day is my decisive meeting with {k}?",
        ],
        "When are the final interviews at {ks}?",
        ["{k}"],
        [
            "{k} posted another role for a data engineer.",
            "The recruiter from {k} mentioned a salary band around {n}0k.",
            "{name} used to work at {k} and says the team is nice.",
            "The {k} office is a {n} minute walk from the station.",
            "I read {k}'s engineering blog on {w}, it was decent.",
        ],
    ),
    FactType(
        "fitness",
        "record",
        ["deadlift", "squat", "bench", "press", "snatch", "thruster"],
        _kg,
        [
            "New personal best today: {v} on the {k}!",
            "Hit {v} on the {k} this morning, a personal best.",
        ],
        ["{v} on the {k} is a big step up, well done.", "CONFIRM"],
        ["What is my personal best on the {k}?", "How many kg was my best {k}?"],
        [
            "What's the heaviest {k} I've ever managed?",
            "How much weight did I lift at my strongest {k}?",
        ],
        "What are my personal bests on the {ks}?",
        ["{k}"],
        [
            "My {k} form felt off, lower back sore after {n} sets.",
            "{name} filmed my {k} so I can check the bar path.",
            "Skipped {k} today, wrist is still sore.",
            "Watched a video on {k} warm-ups, trying it on {w}.",
            "Did {n} sets of light {k} as a deload.",
        ],
    ),
    FactType(
        "novel",
        "character",
        [],
        _pick(JOBS),
        [
            "Decided for the novel: {k} works as a {v}, it gives her a reason to be out at night.",
            "In the book, {k} is going to be a {v}, that settles her backstory.",
        ],
        ["A {v} is a great fit for {k}.", "CONFIRM"],
        ["What does {k} work as in the novel?", "What is {k}'s job in the book?"],
        ["How does {k} earn a living in my story?", "What occupation did I give {k}?"],
        "What do {ks} work as in the novel?",
        ["{k}"],
        [
            "{k} gets a scene with the harbour master in chapter {n}.",
            "My writing group thinks {k} is too passive in the middle.",
            "I gave {k} a younger brother, still not sure about it.",
            "{k}'s dialogue in the prologue needs work.",
            "Should {k} know about the letter before chapter {n}?",
        ],
    ),
    FactType(
        "car",
        "repair",
        [
            "alternator",
            "clutch",
            "battery",
            "radiator",
            "starter",
            "thermostat",
            "exhaust",
            "injectors",
        ],
        lambda rng: f"{rng.choice(GARAGES)} for {rng.randrange(90, 1400, 10)} euros",
        [
            "The Jeep's {k} was replaced by {v}, paid today.",
            "Finally got the {k} swapped: {v}, including labour.",
        ],
        ["Okay, {k} done by {v}, I'll note it in the service history.", "CONFIRM"],
        [
            "Who replaced the Jeep's {k} and what did it cost?",
            "Where was the {k} swapped and for how much?",
        ],
        [
            "Which mechanic did the {k} job, and what did I pay?",
            "What did the {k} work cost me, and who did it?",
        ],
        "Who replaced the {ks} and what did each cost?",
        ["{k}"],
        [
            "The {k} warning light flickered again on the motorway.",
            "A forum says the Jeep's {k} fails around {n}0,000 km.",
            "{name} thinks the {k} noise is just the belt.",
            "Another garage had quoted {n}00 euros for the {k}, way too much.",
            "Checked the {k} connections myself on {w}, looked fine.",
        ],
    ),
    FactType(
        "pets",
        "food",
        [],
        _grams,
        [
            "The vet wants {k} on {v} of dry food a day, split into two meals.",
            "New feeding plan from the vet: {v} a day for {k}.",
        ],
        ["{v} a day for {k}, noted.", "CONFIRM"],
        [
            "How much dry food per day did the vet say for {k}?",
            "What is {k}'s daily food amount from the vet?",
        ],
        [
            "What portion should {k} eat in twenty-four hours?",
            "How big are {k}'s rations supposed to be?",
        ],
        "How much food did the vet say for {ks}?",
        ["{k}"],
        [
            "{k} barked at the postman for {n} minutes straight.",
            "{k} hates the new harness, she lies down and refuses to move.",
            "{name} walked {k} on {w} while I was at work.",
            "{k} chewed through another toy, that's the {n}th this month.",
            "The vet clinic sent a reminder about {k}'s vaccination on {d}.",
        ],
    ),
]

PET_NAMES = ["Biscuit", "Pepper", "Juno", "Miso", "Waffles", "Nala"]
CHARACTER_NAMES = ["Ilse", "Marguerite", "Tamsin", "Odile", "Saskia", "Henrike", "Beatrix"]

# Temporal problems: several attempts at one problem, in order, in different places.
PROBLEMS: list[tuple[str, str, list[str]]] = [
    (
        "renovation",
        "the leaking tap",
        [
            "a new washer",
            "plumber's tape on the thread",
            "tightening the packing nut",
            "a whole new cartridge",
        ],
    ),
    (
        "renting",
        "the damp patch in the bedroom",
        [
            "a dehumidifier",
            "anti-mould paint",
            "opening the window twice a day",
            "moving the wardrobe off the wall",
        ],
    ),
    (
        "garden",
        "the aphids on the roses",
        ["a soapy water spray", "ladybird larvae", "garlic spray", "pruning the worst stems"],
    ),
    (
        "python",
        "the flaky upload test",
        ["a longer timeout", "retrying the request", "mocking the clock", "a fixed random seed"],
    ),
    (
        "fitness",
        "the knee pain when running",
        ["new running shoes", "a knee strap", "shorter strides", "physio exercises"],
    ),
    (
        "car",
        "the dashboard rattle",
        [
            "foam tape behind the glovebox",
            "tightening the vent screws",
            "a felt pad under the trim",
            "removing the coin tray",
        ],
    ),
    (
        "baking",
        "the flat sourdough",
        ["a longer bulk ferment", "a stronger flour", "a hotter oven", "a fresher starter"],
    ),
    (
        "pets",
        "the barking at night",
        [
            "a blackout curtain",
            "a later evening walk",
            "a white noise machine",
            "a chew toy at bedtime",
        ],
    ),
    (
        "cooking",
        "the sticking wok",
        [
            "re-seasoning it with oil",
            "a hotter flame",
            "drying the food first",
            "a splash of water to deglaze",
        ],
    ),
    (
        "novel",
        "the sagging middle chapters",
        [
            "a new subplot",
            "cutting two chapters",
            "moving the reveal earlier",
            "a ticking deadline",
        ],
    ),
    (
        "finance",
        "the forgotten subscriptions",
        [
            "a spreadsheet of renewals",
            "a separate card",
            "calendar reminders",
            "cancelling everything",
        ],
    ),
    (
        "jobs",
        "the silence after applications",
        [
            "follow-up emails",
            "referrals from friends",
            "a shorter CV",
            "applying earlier in the week",
        ],
    ),
]
# The first attempt at a problem never says it is a retry; later ones may.
ATTEMPT_FIRST = [
    "About {p}: today I tried {r}. Fingers crossed.",
    "Started tackling {p}, I went with {r} to begin with.",
]
ATTEMPT_USER = [
    "Update on {p}, I went with {r} this time.",
    "Had another go at {p}, this time with {r}.",
    "New idea for {p}: I tried {r} today.",
]
ATTEMPT_MENTIONS = [
    "{p} is still annoying me, honestly.",
    "{name} asked about {p}, I said we're working on it.",
    "Not much change with {p} this week.",
    "I keep forgetting to deal with {p}.",
]
TEMPORAL_FIRST = ["What was the first thing we tried for {p}?", "What did I try first against {p}?"]
TEMPORAL_LAST = ["What was the most recent thing I tried for {p}?", "What did I try last for {p}?"]


# ----------------------------------------------------------------------------- code blocks


def code_block(rng: random.Random) -> str:
    fn, helper = rng.sample(IDENTIFIERS, 2)
    arg = rng.choice(["rows", "items", "paths", "records", "batches"])
    lines = [
        f"def {fn}({arg}: list[dict], limit: int = {rng.randint(10, 500)}) -> list[dict]:",
        f'    """{rng.choice(["Keep", "Return", "Collect"])} the {arg} that pass the check."""',
        "    out: list[dict] = []",
    ]
    body = [
        f"    for row in {arg}:",
        f"        if row.get('{rng.choice(['id', 'status', 'name', 'score'])}') is None:",
        "            continue",
        f"        value = {helper}(row)",
        f"        if value > {rng.randint(1, 99)}:",
        "            out.append(row)",
        "        if len(out) >= limit:",
        "            break",
    ]
    lines += body
    extra = [
        f"    out.sort(key=lambda r: r.get('{rng.choice(['ts', 'rank', 'size'])}', 0))",
        f"    log.debug('{fn}: %d of %d kept', len(out), len({arg}))",
        "    # keep the order stable for the tests",
        f"    assert len(out) <= limit, '{fn} overflow'",
    ]
    lines += rng.sample(extra, rng.randint(2, 4))
    lines += ["    return out"]
    intro = rng.choice(
        [
            "Here's a version that should work:",
            "Something like this:",
            "A minimal sketch, adjust names as you like:",
        ]
    )
    outro = rng.choice(
        [
            "The early break keeps it cheap on big inputs.",
            "It stays small enough to test on its own.",
            "Swap the threshold for whatever your data needs.",
        ]
    )
    return intro + "\n\n```python\n" + "\n".join(lines) + "\n```\n\n" + outro


# ----------------------------------------------------------------------------- generation


@dataclass
class Item:
    """A scheduled user/assistant pair: a fact, a distractor or an attempt."""

    subject: str
    target: float  # wanted position as a share of the chat
    group: str  # items of one group never share a stretch
    user: str
    assistant: str
    tag: tuple[str, int] | None = None  # ("fact" | "attempt", index)
    ids: list[str] = field(default_factory=list)


class _Filler:
    """Slot values for templates; no filled text may hold a planted value by accident."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.values: list[str] = []
        self.any_value: re.Pattern[str] | None = None

    def reserve(self, value: str) -> None:
        self.values.append(value)
        self.any_value = None

    def found(self, text: str) -> list[str]:
        """The planted values in the text."""
        if not self.values:
            return []
        if self.any_value is None:
            alternatives = sorted(self.values, key=len, reverse=True)
            self.any_value = re.compile(
                r"(?<![\w.])(?:" + "|".join(map(re.escape, alternatives)) + r")(?![\w%])"
            )
        return [m.group(0) for m in self.any_value.finditer(text)]

    def clean(self, text: str, allow: str = "") -> bool:
        return all(v == allow for v in self.found(text))

    def slots(self, topic: str = "") -> dict[str, Any]:
        r = self.rng
        return {
            "t": topic,
            "n": r.randint(2, 9),
            "m": r.randint(110, 990),
            "d": date_str(r),
            "w": r.choice(WEEKDAYS),
            "name": r.choice(FIRST_NAMES),
            "place": r.choice(PLACES),
            "shop": r.choice(SHOPS),
            "prod": r.choice(PRODUCTS),
            "fn": r.choice(IDENTIFIERS),
        }

    def fill(self, template: str, allow: str = "", **extra: Any) -> str:
        for _ in range(100):
            values = self.slots()
            values.update(extra)
            text = template.format(**values)
            if self.clean(text, allow):
                return text[:1].upper() + text[1:]
        raise RuntimeError(f"cannot fill {template!r} without a planted value")


def value_pattern(value: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])" + re.escape(value) + r"(?![\w%])")


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p).strip()


def _words(text: str) -> int:
    return len(text.split())


def _pad(rng: random.Random, text: str, pool_open: list[str], pool_close: list[str]) -> str:
    """Add generic sentences until the message has at least 15 words."""
    while _words(text) < 15:
        fresh_open = [s for s in pool_open if s and s not in text]
        fresh_close = [s for s in pool_close if s and s not in text]
        if fresh_open and (rng.random() < 0.5 or not fresh_close):
            text = _join(rng.choice(fresh_open), text)
        elif fresh_close:
            text = _join(text, rng.choice(fresh_close))
        else:
            break
    return text


def _assign_kinds(n_questions: int) -> dict[str, int]:
    counts = {k: round(n_questions * s) for k, s in KIND_SHARES.items()}
    counts["lexical"] += n_questions - sum(counts.values())
    return counts


def make_chat(n_messages: int, seed: int, chat_id: str | None = None) -> dict[str, Any]:
    """{"id": str, "messages": [{"id": str, "role": "user"|"assistant", "content": str}],
    "questions": [{"id": str, "text": str, "answers": [message ids], "kind": str,
    "entities": [str]}]}"""
    if n_messages < 200:
        raise ValueError("n_messages must be at least 200")
    rng = random.Random(seed)  # noqa: S311 - a reproducible data set, not secrets
    n_questions = max(1, round(n_messages * QUESTIONS_PER_1000 / 1000))
    kinds = _assign_kinds(n_questions)

    # --- choose the facts: (type, key) pairs, per-chat keys for the name-keyed types
    types = list(FACT_TYPES)
    people = rng.sample(FIRST_NAMES, 10)
    chars = rng.sample(CHARACTER_NAMES, 6)
    pets = rng.sample(PET_NAMES, 4)
    per_type_keys: dict[str, list[str]] = {}
    for ft in types:
        keys = {"allergy": people, "character": chars, "food": pets}.get(ft.name, ft.keys)
        per_type_keys[ft.name] = rng.sample(keys, len(keys))
    # multi questions: 2-3 keys of one type (a type with a multi phrasing and enough keys)
    multi_groups: list[tuple[FactType, list[str]]] = []
    multi_types = [ft for ft in types if ft.multi and len(per_type_keys[ft.name]) >= 4]
    rng.shuffle(multi_types)
    for i in range(kinds["multi"]):
        ft = multi_types[i % len(multi_types)]
        size = 3 if rng.random() < 0.3 and len(per_type_keys[ft.name]) >= 5 else 2
        keys = [per_type_keys[ft.name].pop() for _ in range(size)]
        multi_groups.append((ft, keys))
    singles: list[tuple[FactType, str]] = [(ft, k) for ft in types for k in per_type_keys[ft.name]]
    rng.shuffle(singles)
    n_single = kinds["lexical"] + kinds["paraphrase"]
    if len(singles) < n_single:  # not enough distinct keys: fewer questions, same shares
        scale = len(singles) / n_single
        kinds["lexical"] = int(kinds["lexical"] * scale)
        kinds["paraphrase"] = len(singles) - kinds["lexical"]
        n_single = len(singles)
    singles = singles[:n_single]
    problems = rng.sample(PROBLEMS, min(kinds["temporal"], len(PROBLEMS)))
    kinds["temporal"] = len(problems)

    # --- values: unique within the chat, and their numbers kept out of filler text
    used_values: set[str] = set()
    filler = _Filler(rng)

    def new_value(ft: FactType) -> str:
        for _ in range(200):
            v = ft.value(rng)
            if not any(v in u or u in v for u in used_values):
                used_values.add(v)
                filler.reserve(v)
                return v
        raise RuntimeError(f"no fresh value for {ft.name}")

    facts: list[dict[str, Any]] = []  # {"ft", "key", "value", "item"}
    items: list[Item] = []

    def plant(ft: FactType, key: str, target: float, group: str) -> dict[str, Any]:
        value = new_value(ft)
        fact = {"ft": ft, "key": key, "value": value}
        fact["index"] = len(facts)
        facts.append(fact)
        fact["target"] = target
        fact["group"] = group
        return fact

    for ft, keys in multi_groups:
        group_name = f"multi-{ft.name}-{len(items)}-{rng.random()}"
        targets = sorted(rng.uniform(0.02, 0.45) for _ in keys)
        for key, target in zip(keys, targets, strict=True):
            plant(ft, key, target, group_name)
    for ft, key in singles:
        plant(ft, key, rng.uniform(0.02, 0.45), f"single-{ft.name}-{key}")

    # Fact texts are built after the question phrasing is chosen (paraphrases are checked).
    single_kinds = ["lexical"] * kinds["lexical"] + ["paraphrase"] * kinds["paraphrase"]
    rng.shuffle(single_kinds)
    multi_count = sum(len(k) for _, k in multi_groups)
    questions: list[dict[str, Any]] = []

    def fact_texts(fact: dict[str, Any]) -> tuple[str, str]:
        ft, key, value = fact["ft"], fact["key"], fact["value"]
        user = filler.fill(rng.choice(ft.user), allow=value, k=key, v=value)
        user = _pad(
            rng,
            _join(
                rng.choice(LEADS) if rng.random() < 0.6 else "",
                user,
                rng.choice(TAILS) if rng.random() < 0.4 else "",
            ),
            LEADS,
            TAILS,
        )
        reply = rng.choice(ft.assistant)
        if reply == "CONFIRM":
            reply = rng.choice(CONFIRMS)
        else:
            reply = filler.fill(reply, allow=value, k=key, v=value)
        reply = _pad(rng, reply, ASSISTANT_OPENERS, ASSISTANT_CLOSERS)
        return user, reply

    def entity_list(fact: dict[str, Any]) -> list[str]:
        return [e.format(k=fact["key"]) for e in fact["ft"].entities]

    for fact in facts:
        ft = fact["ft"]
        kind = None if fact["index"] < multi_count else single_kinds[fact["index"] - multi_count]
        for _attempt in range(50):
            user, reply = fact_texts(fact)
            if kind != "paraphrase":
                break
            qtext = filler.fill(rng.choice(ft.paraphrase), k=fact["key"])
            carriers = [t for t in (user, reply) if fact["value"] in t]
            shared = content_words(qtext) & set().union(*(content_words(t) for t in carriers))
            if len(shared) <= 1:
                break
        else:
            raise RuntimeError(f"paraphrase of {ft.name} overlaps its answer: {shared}")
        fact["item"] = Item(
            ft.subject, fact["target"], fact["group"], user, reply, ("fact", fact["index"])
        )
        items.append(fact["item"])
        if kind == "lexical":
            fact["question"] = {
                "text": filler.fill(rng.choice(ft.lexical), k=fact["key"]),
                "kind": "lexical",
                "facts": [fact["index"]],
            }
        elif kind == "paraphrase":
            fact["question"] = {"text": qtext, "kind": "paraphrase", "facts": [fact["index"]]}
        # distractors: 3-5 pairs repeating the key, anywhere in the chat
        for template in rng.sample(ft.distractors, rng.randint(3, 5)):
            text = _pad(rng, filler.fill(template, k=fact["key"]), USER_OPENERS, USER_CLOSERS)
            answer = filler.fill(
                rng.choice(SUBJECTS[ft.subject]["assistant"]),
                t=rng.choice(SUBJECTS[ft.subject]["topics"]),
            )
            answer = _pad(
                rng,
                _join(rng.choice(ASSISTANT_OPENERS), answer),
                ASSISTANT_OPENERS,
                ASSISTANT_CLOSERS,
            )
            if rng.random() < 0.5:
                text, answer_text = text, answer
                items.append(
                    Item(ft.subject, rng.uniform(0.0, 1.0), "distractor", text, answer_text)
                )
            else:  # the assistant mentions it, answering an ordinary user message
                user_text = _pad(
                    rng,
                    filler.fill(
                        rng.choice(SUBJECTS[ft.subject]["user"]),
                        t=rng.choice(SUBJECTS[ft.subject]["topics"]),
                    ),
                    USER_OPENERS,
                    USER_CLOSERS,
                )
                items.append(
                    Item(
                        ft.subject,
                        rng.uniform(0.0, 1.0),
                        "distractor",
                        user_text,
                        _join(
                            rng.choice(
                                [
                                    "You mentioned earlier:",
                                    "Side note:",
                                    "Also worth remembering:",
                                    "Noted before:",
                                ]
                            ),
                            filler.fill(template, k=fact["key"]),
                        ),
                    )
                )

    # temporal problems: 2-4 attempts, in order, in the fact zone, plus mentions
    attempts: list[dict[str, Any]] = []
    for pi, (subject, problem, remedies) in enumerate(problems):
        tried = rng.sample(remedies, rng.randint(2, 4))
        targets = sorted(rng.uniform(0.02, 0.47) for _ in tried)
        ids: list[Item] = []
        for step, (remedy, target) in enumerate(zip(tried, targets, strict=True)):
            said = rng.choice(ATTEMPT_FIRST if step == 0 else ATTEMPT_USER)
            user = _pad(rng, filler.fill(said, p=problem, r=remedy), LEADS, TAILS)
            reply = _pad(rng, rng.choice(CONFIRMS), ASSISTANT_OPENERS, ASSISTANT_CLOSERS)
            item = Item(subject, target, f"problem-{pi}", user, reply, ("attempt", pi))
            items.append(item)
            ids.append(item)
        for template in rng.sample(ATTEMPT_MENTIONS, 3):
            text = _pad(rng, filler.fill(template, p=problem), USER_OPENERS, USER_CLOSERS)
            reply = _pad(
                rng,
                rng.choice([*ASSISTANT_OPENERS, "Hang in there."]) or "Hang in there.",
                ASSISTANT_OPENERS,
                ASSISTANT_CLOSERS,
            )
            items.append(Item(subject, rng.uniform(0.0, 1.0), "distractor", text, reply))
        which = "first" if rng.random() < 0.6 else "last"
        template = rng.choice(TEMPORAL_FIRST if which == "first" else TEMPORAL_LAST)
        attempts.append(
            {
                "items": ids,
                "which": which,
                "problem": problem,
                "text": filler.fill(template, p=problem),
                "remedy": tried[0] if which == "first" else tried[-1],
            }
        )

    # standing instructions
    for user, reply in rng.sample(INSTRUCTIONS, 3):
        items.append(Item("instructions", rng.uniform(0.0, 0.8), "instruction", user, reply))

    # --- lay out stretches of one subject (2-6 pairs = 4-12 messages); planted items come
    # in order of their target position, facts and attempts before distractors
    items.sort(key=lambda it: it.target)
    pending = list(items)
    total_pairs = n_messages // 2
    pairs: list[tuple[str, str, Item | None]] = []
    subjects = list(SUBJECTS)
    previous = ""
    while len(pairs) < total_pairs:
        position = len(pairs) / total_pairs
        due = [it for it in pending if it.target <= position + 0.01]
        if due and due[0].subject == "instructions":
            it = due[0]
            pending.remove(it)
            pairs.append((it.user, it.assistant, it))
            continue
        due = [it for it in due if it.subject != "instructions"]
        urgent = [it for it in due if it.tag is not None and it.subject != previous]
        others = [it for it in due if it.subject != previous]
        if urgent:
            subject = urgent[0].subject
        elif others:
            subject = others[0].subject
        else:
            subject = rng.choice([s for s in subjects if s != previous])
        previous = subject
        length = rng.randint(2, 6)
        topic = rng.choice(SUBJECTS[subject]["topics"])
        taken: list[Item] = []
        groups: set[str] = set()
        room = length - 1 if rng.random() < 0.7 else length
        for it in sorted(due, key=lambda it: (it.tag is None, it.target)):
            if len(taken) >= room:
                break
            if it.subject == subject and (it.group == "distractor" or it.group not in groups):
                taken.append(it)
                groups.add(it.group)
        taken.sort(key=lambda it: it.target)
        for it in taken:
            pending.remove(it)
        slots = sorted(rng.sample(range(length), len(taken))) if taken else []
        for i in range(length):
            if slots and i == slots[0]:
                slots.pop(0)
                it = taken.pop(0)
                pairs.append((it.user, it.assistant, it))
            else:
                pairs.append((*_filler_pair(rng, filler, subject, topic, i), None))
        if rng.random() < 0.12:
            pairs.append((*rng.choice(SMALL_TALK), None))
    # anything still pending (distractors aimed near the end) goes last, before the cut
    for it in pending:
        if it.tag is not None:
            raise RuntimeError("a fact was not placed")  # pragma: no cover
    keep = total_pairs - len(pending)
    while len(pairs) > keep:  # trim the overshoot, dropping ordinary pairs only
        last_plain = max(i for i, (_, _, it) in enumerate(pairs) if it is None)
        del pairs[last_plain]
    pairs += [(it.user, it.assistant, it) for it in pending]
    placed = {id(it) for _, _, it in pairs if it is not None}
    for it in items:
        if it.tag is not None and id(it) not in placed:
            raise RuntimeError("a fact was cut off the end")  # pragma: no cover

    # --- number the messages
    messages: list[dict[str, str]] = []
    for user, reply, owner in pairs:
        for role, text in (("user", user), ("assistant", reply)):
            mid = f"m{len(messages) + 1:05d}"
            messages.append({"id": mid, "role": role, "content": text})
            if owner is not None:
                owner.ids.append(mid)
    if n_messages % 2:
        messages.append(
            {
                "id": f"m{len(messages) + 1:05d}",
                "role": "user",
                "content": rng.choice(SMALL_TALK)[0],
            }
        )
    content = {m["id"]: m["content"] for m in messages}
    limit = int(FACT_ZONE * len(messages))

    def holders(it: Item, value: str) -> list[str]:
        found = [mid for mid in it.ids if value in content[mid]]
        if not found:
            raise RuntimeError(f"value {value!r} missing from its own fact")  # pragma: no cover
        return found

    for fact in facts:
        fact["answers"] = holders(fact["item"], fact["value"])
    # --- questions
    for fact in facts:
        if "question" in fact:
            q = fact["question"]
            questions.append(
                {
                    "text": q["text"],
                    "answers": fact["answers"],
                    "kind": q["kind"],
                    "entities": entity_list(fact),
                }
            )
    by_group: dict[str, list[dict[str, Any]]] = {}
    for fact in facts[:multi_count]:
        by_group.setdefault(fact["group"], []).append(fact)
    for group in by_group.values():
        ft = group[0]["ft"]
        keys = [f["key"] for f in group]
        joined = ", ".join(keys[:-1]) + " and " + keys[-1]
        questions.append(
            {
                "text": filler.fill(ft.multi, ks=joined),
                "answers": sorted({a for f in group for a in f["answers"]}),
                "kind": "multi",
                "entities": sorted({e for f in group for e in entity_list(f)}),
            }
        )
    for at in attempts:
        it = at["items"][0] if at["which"] == "first" else at["items"][-1]
        questions.append(
            {
                "text": at["text"],
                "answers": holders(it, at["remedy"]),
                "kind": "temporal",
                "entities": [at["problem"]],
            }
        )
    rng.shuffle(questions)
    for i, q in enumerate(questions, 1):
        q["id"] = f"q{i:03d}"
    questions = [
        {
            "id": q["id"],
            "text": q["text"],
            "answers": q["answers"],
            "kind": q["kind"],
            "entities": q["entities"],
        }
        for q in questions
    ]

    # --- checks: the answers are in the fact zone and hold a value nothing else holds
    holding: dict[str, set[str]] = {}
    for mid, text in content.items():
        for value in filler.found(text):
            holding.setdefault(value, set()).add(mid)
    for fact in facts:
        for mid in fact["answers"]:
            if int(mid[1:]) > limit:
                raise RuntimeError(f"a fact landed after the fact zone {mid}")
        elsewhere = holding.get(fact["value"], set()) - set(fact["answers"])
        if elsewhere:
            raise RuntimeError(f"value {fact['value']!r} also in {elsewhere}")  # pragma: no cover

    return {
        "id": chat_id or f"long-{n_messages}-{seed}",
        "messages": messages,
        "questions": questions,
    }


def _filler_pair(
    rng: random.Random, filler: _Filler, subject: str, topic: str, index: int
) -> tuple[str, str]:
    for _ in range(100):
        user, reply = _filler_pair_once(rng, filler, subject, topic, index)
        if filler.clean(user) and filler.clean(reply):
            return user, reply
    raise RuntimeError("cannot write a filler pair without a planted value")


def _filler_pair_once(
    rng: random.Random, filler: _Filler, subject: str, topic: str, index: int
) -> tuple[str, str]:
    spec = SUBJECTS[subject]
    s = filler.slots(topic)
    picks = rng.sample(spec["user"], 2 if rng.random() < 0.6 else 1)
    body = " ".join(p.format(**s)[:1].upper() + p.format(**s)[1:] for p in picks)
    lead = (
        rng.choice(USER_OPENERS)
        if index == 0
        else rng.choice(["Following up.", "Related to that.", "One more on this.", "Also.", ""])
    )
    user = _join(lead, body, rng.choice(USER_CLOSERS))
    user = _pad(rng, user, USER_OPENERS, USER_CLOSERS)
    if subject == "python" and rng.random() < 0.5:
        reply = code_block(rng)
    else:
        advice = rng.sample(spec["assistant"], min(len(spec["assistant"]), rng.randint(2, 3)))
        text = " ".join(a.format(**s)[:1].upper() + a.format(**s)[1:] for a in advice)
        reply = _join(rng.choice(ASSISTANT_OPENERS), text, rng.choice(ASSISTANT_CLOSERS))
        if rng.random() < 0.15:  # an occasional long answer
            extra = [a for a in spec["assistant"] if a not in advice]
            reply = _join(
                reply,
                " ".join(a.format(**s)[:1].upper() + a.format(**s)[1:] for a in extra),
                "In short, go step by step and write down what changes.",
            )
        reply = _pad(rng, reply, ASSISTANT_OPENERS, ASSISTANT_CLOSERS)
    return user, reply


def make_set(
    sizes: tuple[int, ...] = (1000, 1000, 1000, 2000, 2000), seed: int = 20261123
) -> list[dict[str, Any]]:
    chats = []
    for i, size in enumerate(sizes):
        letter = "abcdefghijklmnopqrstuvwxyz"[sum(1 for s in sizes[:i] if s == size)]
        chats.append(make_chat(size, seed * 100 + i, chat_id=f"long-{size}-{letter}"))
    return chats


def stats(chats: list[dict[str, Any]]) -> str:
    lines = []
    for chat in chats:
        chars = sum(len(m["content"]) for m in chat["messages"])
        kinds = Counter(q["kind"] for q in chat["questions"])
        words = [len(m["content"].split()) for m in chat["messages"]]
        lines.append(
            f"{chat['id']}: {len(chat['messages'])} messages, ~{chars // 4} tokens, "
            f"{len(chat['questions'])} questions "
            f"({', '.join(f'{k} {kinds[k]}' for k in KIND_SHARES)}), "
            f"words/message min {min(words)} median {sorted(words)[len(words) // 2]} "
            f"max {max(words)}"
        )
    total = Counter(q["kind"] for c in chats for q in c["questions"])
    n = sum(total.values())
    lines.append(
        "kinds overall: " + ", ".join(f"{k} {total[k]} ({total[k] / n:.0%})" for k in KIND_SHARES)
    )
    return "\n".join(lines)


def main() -> int:
    chats = make_set()
    out = Path(__file__).resolve().parent / "data" / "long_chats.json"
    text = json.dumps(chats, ensure_ascii=False, indent=1)
    out.write_text(text + "\n", encoding="utf-8")
    print(stats(chats))
    print(f"wrote {out} ({len(text.encode()) / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
