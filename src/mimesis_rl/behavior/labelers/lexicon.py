"""Word lists and regular expressions behind the `rules` labeler, one block per pattern.

Each cue is (name, weight, compiled regex); the weights are the labeller's confidence that the cue
alone shows the pattern, combined by noisy-OR in `rules.py`. Texts are matched lower-cased, with
curly quotes straightened.
"""

from __future__ import annotations

import re
from functools import lru_cache

Cue = tuple[str, float, re.Pattern[str]]


def _cues(*items: tuple[str, float, str]) -> tuple[Cue, ...]:
    return tuple((name, weight, re.compile(rx, re.IGNORECASE)) for name, weight, rx in items)


def normalise(text: str) -> str:
    return (
        text.replace("\u2019", "'")
        .replace("\u2018", "'")
        .replace("\u201c", '"')
        .replace("\u201d", '"')
        .replace("\u2014", " - ")
        .replace("\u2026", "...")
    )


# --- the agent's last turn -------------------------------------------------------------------------------

QUESTION_START = re.compile(
    r"^(what|where|when|why|how|which|who|whom|whose|do|does|did|are|is|was|were|can|could|would|will|shall|"
    r"should|have|has|may|might)\b",
    re.IGNORECASE,
)
YES_NO_START = re.compile(
    r"^(do|does|did|are|is|was|were|can|could|would|will|shall|should|have|has|may)\b", re.IGNORECASE
)
NUMERIC_QUESTION = re.compile(
    r"\b(how (much|many|long|often|old|far)|budget|price|what time|when|which days?|"
    r"what dates?|how big|annual|income|number)\b",
    re.IGNORECASE,
)
AGENT_OFFER = re.compile(
    r"\b(would you like|do you want|want me to|shall i|should i|how about|what about|can i interest|"
    r"i (can|could) (offer|give|do|book|reserve|schedule|add|send|come down|transfer|recommend)|"
    r"i(?:'d| would) (suggest|recommend|go with)|i (suggest|recommend|propose)|"
    r"you (might|may) (enjoy|like|want)|"
    r"you (should|could) (try|consider|take|buy|call|go|file|read|watch|join)|consider|"
    r"let me|here (are|is|'s)|i found|i've (found|put|booked|added|reserved|set up|scheduled)|our (\w+ )?"
    r"(plan|membership|bestseller|best seller|tutors|rate|price)|we (can|could) offer|is available|"
    r"is our|it's our|on offer|final offer|deal|please (upload|fill|share|provide|install|send|give)|"
    r"i can do|i'll give|that's my|best i can do|i'm going to transfer)\b",
    re.IGNORECASE,
)
PERSONAL_REQUEST = re.compile(
    r"\b(your (full )?name|date of birth|birthday|d\.?o\.?b|address|phone( number)?|e-?mail|"
    r"(driver'?s )?licen[cs]e( number)?|social security|ssn|card number|cvv|passport|id\b|photo|fingerprint|"
    r"password|income|salary|employer|maiden name|medical|medications?|insurance details|where you live|"
    r"which city|school name|report card|location|track|account number|bank statement|pay ?slips|"
    r"verify your|purpose of your trip|reason for your trip|about yourself|your age)\b",
    re.IGNORECASE,
)

# --- cues in the user's message, per pattern -------------------------------------------------------------

VAGUE = _cues(
    ("vague_word", 0.45, r"\b(something|somewhere|anything|anywhere|whatever|stuff|some place)\b"),
    (
        "vague_quality",
        0.35,
        r"\b(nice|good|decent|special|normal|reasonable|appropriate|impressive|smarter|"
        r"professional|modern|weird|strange|off|better)\b",
    ),
    ("surprise_me", 0.7, r"\bsurprise me\b"),
    (
        "help_generic",
        0.5,
        r"\b(help (me )?with something|do something about it|can you fix it|what can i do|"
        r"you're the expert)\b",
    ),
    (
        "acting_weird",
        0.6,
        r"\b(acting (weird|strange|up)|doing something (weird|strange)|something'?s (off|wrong))\b",
    ),
)
VAGUE_GENERIC_ANSWER = re.compile(
    r"^(a |an |some )?(good |nice |new )?(music|food|dinner|lunch|a gift|gift|present|a present|movie|"
    r"hotel|a hotel|good food|fun|help)[.!]*$",
    re.IGNORECASE,
)

IMPLICIT = _cues(
    (
        "my_people",
        0.55,
        r"\bmy (two |three )?(kids?|children|son|daughter|boys|girls|wife|husband|partner|"
        r"girlfriend|boyfriend|mother|mom|dad|father|parents|teenage|"
        r"(five|\d+)-year-old|baby|toddler|grandma|elderly)\b",
    ),
    (
        "my_body",
        0.55,
        r"\b(my (knees?|back|hips?|feet|health)|knee surgery|surgery|pregnant|allergic|"
        r"intolerant|diabetic|diabetes|gluten|vegan|vegetarian|keto|snore|can'?t stand|can'?t eat|"
        r"don'?t eat)\b",
    ),
    (
        "my_situation",
        0.5,
        r"\b(i'?m (a )?(student|retired|\d+|on a budget|broke|going with|eating with|"
        r"bringing|not really a|not a)|just retired|i rent|i work (nights|from home)|"
        r"i (ride|drive|commute|walk|get up|go to bed|travel|wake up|read)|i don'?t drive|"
        r"we go to bed|we just started|my (commute|apartment|living room|budget|current one)|"
        r"is (tiny|small)|i mostly use|out all day)\b",
    ),
    (
        "context_fact",
        0.3,
        r"\b(we'?re|we are|i'?m|i am|he'?s|she'?s|they'?re) (only|just|bringing|going|eating)\b",
    ),
)
EXPLICIT_PREFERENCE = re.compile(
    r"\b(i (want|prefer|need|like|love|would like|'d like)|please)\b", re.IGNORECASE
)

WITHHOLD = _cues(
    (
        "deflect",
        0.7,
        r"\b(let'?s see|let me see what|rather not (say|tell|share|give|go into|discuss)|"
        r"prefer not|i'?d prefer to focus|let'?s just say|we'?ll see|who knows|not telling|"
        r"can'?t say|i'?d rather discuss|rather keep|to myself|skip|i just want to)\b",
    ),
    (
        "dont_know",
        0.45,
        r"\b(idk|i don'?t know|not sure|no idea|dunno|i'?m not entirely sure|depends|"
        r"i don'?t have it)\b",
    ),
    (
        "why_ask",
        0.55,
        r"\b(why do you ask|why does (that|it) matter|what does that have to do|why would you need|"
        r"why do you need|what is this (information )?used for|is that really necessary)\b",
    ),
    ("turn_back", 0.35, r"\b(what about you|how about you|and you|you\?|your turn)\b"),
)

PRIVACY = _cues(
    (
        "privacy_word",
        0.75,
        r"\b(personal (info|information|details|stuff|question)|privacy|private|"
        r"classified|none of your business|no business)\b",
    ),
    (
        "why_need",
        0.7,
        r"\bwhy (do|would|does) (you|it|that|my \w+) (need|matter|want)|why do you need|"
        r"what (is|does) (this|that) (information )?(used for|have to do)|"
        r"i don'?t see why my\b",
    ),
    (
        "decline_detail",
        0.7,
        r"\b(rather not|prefer not|not (giving|hand(ing)? out|uploading|sharing|comfortable)|"
        r"don'?t (hand out|give out|like giving|want to give|really like giving)|keep (that|it|the"
        r" \w+) (to myself|out of it)|skip the \w+)\b",
    ),
    (
        "data_worry",
        0.7,
        r"\b(track(ing)?( where)?|sell my|spam|share(d)? (my|with)|pull my credit|"
        r"shared with anyone|my (data|information|info))\b",
    ),
    (
        "sensitive_item",
        0.35,
        r"\b(cvv|password|social security|ssn|date of birth|birthday|home address|"
        r"my number|phone number|fingerprint|my id\b|bank account|test results|employer|"
        r"license number)\b",
    ),
)

REFUSE = _cues(
    (
        "no_thanks",
        0.85,
        r"\b(no,? thanks?|no thank you|i'?ll pass|pass on that|not interested|"
        r"not for me|no way|absolutely not|i'?m good,? thanks|i'?m fine,? thanks|"
        r"got that covered|not really a \w+ person|i'?ll keep looking|don'?t do that|"
        r"let'?s (leave that off|hold off)|i don'?t want (that|it|any|to)|"
        r"doesn'?t work for me|i don'?t need any of that)\b",
    ),
    ("plain_no", 0.55, r"^(no|nah|nope|hmm,? no|hmm no|not really|no\.)\b"),
    (
        "too_much",
        0.55,
        r"\b(way |far |much )?too (expensive|late|early|long|much|far|pricey)\b|"
        r"\bmore than i want\b|way over\b",
    ),
    (
        "rather_other",
        0.45,
        r"\b(i'?d rather|rather do it myself|i can'?t take|can'?t wait that long|"
        r"i can'?t give you|can'?t help you|i'?m not (paying|doing|going))\b",
    ),
    ("again", 0.35, r"\b(again\?|\bagain\b.*\?)"),
)

CRITICISM = _cues(
    (
        "bad_service",
        0.7,
        r"\b(useless|unhelpful|not helpful|did you even|didn'?t you (even )?check|"
        r"read (your own|what i)|copy-?pasted|generic|not impressed|poor way|terrible policy|"
        r"a joke|ridiculous|unacceptable|unbelievable|waste of time|that'?s your (big )?"
        r"solution|you (never|keep|always) |you said (that|twice)|you'?ve said|"
        r"not even (reading|close)|you'?re not even|gone downhill|don'?t trust|dull)\b",
    ),
    (
        "your_thing",
        0.45,
        r"\byour (system|service|website|policy|quality|instructions|answers?|app|faq|"
        r"quotes|estimates|listing|last)\b",
    ),
    (
        "unfair",
        0.45,
        r"\b(unfair|not okay|that'?s a bit much|overcooked|bland|you forgot|"
        r"nobody told me|wasted)\b",
    ),
    ("insult", 0.6, r"\byou (seem|are|'re) (like )?(a waste|boring|rude|useless|annoying|dumb|stupid)\b"),
    ("i_said", 0.55, r"\bi said\b|\bi paid for\b"),
)

PUSHBACK = _cues(
    (
        "contest",
        0.75,
        r"\b(that'?s not (true|right|what|how)|not true|i don'?t think so|i disagree|"
        r"you'?re wrong|that'?s wrong|is not a|isn'?t a|i don'?t see your point|"
        r"not what i'?ve read|actually no|no,? (it|that|i) (is|was|did|'s)|maybe not,? though|"
        r"would (it|they) though|everyone says|i'?m pretty sure|i (did|tried) that already|"
        r"i already (told|did|tried)|made it worse|hasn'?t helped|didn'?t help|still nothing|"
        r"it worked fine|said so)\b",
    ),
    ("but_counter", 0.4, r"^(but|although|yeah,? but|true,? but|well,? )\b|\bbut what about\b|\bthough\b"),
    ("correction", 0.45, r"^(no|nope),? (it|that|i|the)\b|\bnot (a|an) \w+\.? it'?s\b"),
    ("evidence", 0.35, r"\b(studies|i'?ve read|according to|every other)\b"),
)

INTENT = _cues(
    (
        "revise",
        0.8,
        r"\b(on second thought|change of plans|changed (my|our) minds?|never ?mind|forget (it|the|about)|"
        r"scratch (that|the)|instead|after all|hold off on|switch (it|to)|"
        r"i'?ve decided|we decided|been rethinking|rethinking|i just remembered|let'?s go with|"
        r"now i'?m thinking|i know i said)\b",
    ),
    (
        "make_it",
        0.6,
        r"\b(make it|can we make it|could we (move|change|switch|make|cut|look at)|"
        r"can we (move|change|switch|make|turn|look at)|can you (change|make) it|"
        r"let'?s (make it|switch|do|add|move)|can i still cancel|cancel that|stop,?)\b",
    ),
    ("actually", 0.35, r"\b(actually|wait,|hmm,? actually|oh wait)\b"),
    ("chat_redirect", 0.55, r"\b(anyway|anyways|back to|let'?s talk about|change the subject)\b"),
)

AMBIGUITY = _cues(
    (
        "undecided",
        0.8,
        r"\b(can'?t decide|cannot decide|i'?m torn|torn between|split between|haven'?t decided|"
        r"undecided|going back and forth|back and forth|keep changing my mind|part of me|"
        r"not sure (if|whether|which|what i want|what we need)|nothing'?s decided|"
        r"might not\.|or should i|"
        r"let me think|i'?m thinking .* or|don'?t know what (i|we) (want|need))\b",
    ),
    (
        "or_maybe",
        0.45,
        r"\b(or maybe|or both|either\b|whichever|maybe .* or|or the \w+|but also|"
        r"on the other hand|or might)\b",
    ),
    ("dont_know", 0.35, r"\b(i don'?t know|idk|dunno|i'?m not sure|not sure)\b"),
)

EMOTION = _cues(
    (
        "emotion_word",
        0.7,
        r"\b(love (it|that|this)|i hate|hated|excited|exciting|stressed|stressful|worried|"
        r"scared|scares|terrifying|afraid|frustrat\w*|annoy\w*|angry|sad\b|so happy|"
        r"i'?m happy|thrilled|upset|jealous|starving|so tired|sick of|can'?t wait|"
        r"can'?t believe|freaking out|nervous|anxious|disappointed|jazzed|in my feels|"
        r"i'?m glad|heart set|dream come true|bummer|the worst|sucks|love it)\b",
    ),
    (
        "interjection",
        0.65,
        r"\b(ugh+|yay+|omg|oh my (gosh|god)|oh no|ew+|aw+|yikes|whoa+|woah|wow|dang|"
        r"seriously\?|are you kidding|geez|jeez|smh|ahh+|ooh+|oooh+)\b",
    ),
    (
        "intense_eval",
        0.55,
        r"\b(so|super|really|absolutely|totally) (awesome|amazing|exciting|cool|fun|cute|"
        r"dope|perfect|great|lame|bad|sad|good)\b|\b(perfect|amazing|awesome|incredible)!",
    ),
    ("repeat_punct", 0.6, r"(!!|\?!|!\?|\?\?)"),
    ("emoticon", 0.5, r"(:\)+|:d\b|:\(|xd\b|<3|;\)|:p\b|:o\b|\(:)"),
    ("elongated", 0.5, r"\b\w*([a-z])\1{2,}\w*\b"),
)
CAPS_WORD = re.compile(r"\b[A-Z]{3,}\b")
COMMON_ACRONYMS = frozenset(
    {
        "BYU",
        "USA",
        "NYC",
        "CEO",
        "DNS",
        "SIM",
        "PDF",
        "VIP",
        "LOL",
        "LDS",
        "FAQ",
        "APR",
        "SSN",
        "CVV",
        "EUR",
        "USD",
        "UVU",
        "AP",
        "TV",
        "UI",
        "UX",
        "CS",
        "MBA",
        "NBA",
        "MLB",
        "DSLR",
        "IRL",
        "TBH",
        "IDK",
        "OMG",
        "AI",
        "HP",
        "IT",
        "ID",
        "DC",
        "NY",
        "WWII",
        "ACM",
    }
)

NEGOTIATE = _cues(
    (
        "counter",
        0.8,
        r"\b(would you (do|take|accept)|could you do|can you (do|match|waive|knock|throw|include|"
        r"come down|beat)|match (it|that)|throw in|knock off|waive|best price|we have a deal|"
        r"and we'?ve got a deal|and we have a deal|i'?ll meet you|meet somewhere|we'?re at \d|"
        r"if i (pay|sign|book|buy|pick)|if you (can|throw|waive|include)|"
        r"what if (i|we) (take|drop|pay)|and i'?ll (take|sign|order)|"
        r"i'?ll sign|unless you can|can you match|cheaper|any chance (they|you)'?d do)\b",
    ),
    (
        "price_leverage",
        0.6,
        r"\b(quoted me|offered me|has (it|them) for|for \$?\d+ less|store .* has|"
        r"competitor|other (carriers|stores|shops)|online for|is \$?\d+ less)\b",
    ),
    (
        "split",
        0.7,
        r"\b(i (take|get|keep)|you (take|get|keep)|i can give you) (\d|one|two|three|all)\b.*\b"
        r"(firewood|water|food)|\b(\d|one|two|three) (firewood|waters?|food)\b.*\b(you|i|me)\b",
    ),
    ("counter_price", 0.55, r"^\$?\d[\d,.]*\b.*\b(and|cash|i'?ll)\b|\b\d+ cash\b"),
)

PROBE = _cues(
    ("why", 0.6, r"\b(why|how come)\b"),
    (
        "clarify",
        0.7,
        r"\b(what do you mean|what does (that|it|\w+ \w+) (mean|include|cover)|what'?s the (difference|"
        r"catch)|what exactly|how does (that|it) work|is that (it|a thing)|what'?s in|does (that|it) "
        r"(include|come with|count|actually work)|does .* count|how (much|often|long|many|big)|"
        r"which one|what happens|what was it that|really\?|"
        r"so you (are|were|'re)|do you mean|are you sure|"
        r"is there (a |another |any )|what should i)\b",
    ),
    ("wh_question", 0.3, r"^(what|where|when|why|how|which|who|is|are|does|do|did|can|could)\b[^.!]*\?"),
)
RECIPROCAL_QUESTION = re.compile(
    r"^(and )?(what|how) about you\??$|^(and )?you\??$|^how about yourself\??$", re.IGNORECASE
)

# --- form of the message ---------------------------------------------------------------------------------

CONVENTIONAL = re.compile(
    r"^(hi|hey|hello|heya|hi there|hey there|hello there|yo|sup|bye|goodbye|bye bye|see ya|see you|thanks|"
    r"thank you|thx|ty|good morning|good night|hey!|hello\?|hi again|hello again|welcome|cheers|"
    r"nice talk|nice talking|nice chatting|sounds good|got it|ok thanks|okay thanks)[\s!.?]*$",
    re.IGNORECASE,
)
SHORTHAND = re.compile(
    r"\b(u|ur|pls|plz|thx|wtv|rn|bc|cus|cuz|k|kk|tbh|imo|ya|yea|ppl|bout|gonna|wanna|"
    r"lemme|dunno|idk|tmrw)\b",
    re.IGNORECASE,
)
CORRECTION_LINE = re.compile(r"(^|\s)\*\w+|\w+\*(\s|$)")
VERBISH = re.compile(
    r"\b(am|is|are|was|were|be|been|being|do|does|did|have|has|had|can|could|will|would|shall|should|may|might|"
    r"must|i'm|im|you're|he's|she's|it's|its|that's|thats|there's|we're|they're|i've|i'll|i'd|isn't|aren't|"
    r"wasn't|don't|dont|doesn't|didn't|can't|cant|won't|wouldn't|let's|go|going|went|get|got|make|made|need|"
    r"want|like|love|hate|think|know|see|say|said|take|took|give|gave|come|came|try|tried|look|looks|feel|"
    r"feels|work|works|play|played|watch|watched|read|eat|ate|live|lived|study|studying|send|book|add|help|"
    r"tell|told|keep|put|show|find|found|call|pay|bring|buy|sounds|seems|mean|means|says|agree|guess|hope|"
    r"wish|remember|forgot|plan|start|started|use|used|ask|asked|change|cancel|switch|works|happened|"
    r"thought|heard|saw|wait|stop|ride|drive|snore|retired|started|wants|prefer|bet)\b|\w+(ed|ing)\b",
    re.IGNORECASE,
)
SUBJECT_VERB = re.compile(r"\b(i|you|we|they|he|she|it)\s+(\w+ly\s+)?[a-z]+\b", re.IGNORECASE)
FUNCTION_END = re.compile(
    r"\b(the|a|an|to|and|of|with|for|my|your|but|or|that|because|if|in|on|at|is|are)$", re.IGNORECASE
)
WORD = re.compile(r"[a-z]+(?:'[a-z]+)?", re.IGNORECASE)


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    """English words known to pyspellchecker's offline frequency list (about 160k entries)."""
    from spellchecker import SpellChecker

    return frozenset(SpellChecker(language="en").word_frequency.dictionary)


LAUGHTER = re.compile(r"^(ha|he|ah|hah|heh|lo|lol|xd)+h?$|^l+o+l+$|^a?ha+h*a*$", re.IGNORECASE)


def is_typo(word: str, vocab: frozenset[str]) -> bool:
    """A lower-case word of 3+ letters the word list does not know, that is not laughter, an elongation
    ("soooo") or a contraction written without its apostrophe ("dont", "thats": style, not a typo)."""
    if len(word) < 3 or not word.isalpha() or not word.islower() or word in vocab:
        return False
    if re.search(r"(.)\1\1", word) or LAUGHTER.match(word):
        return False
    for cut in (1, 2, 3):
        if len(word) > cut and f"{word[:-cut]}'{word[-cut:]}" in vocab:
            return False
    return not (word.endswith("s") and word[:-1] in vocab)
