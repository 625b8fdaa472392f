"""The 13 behaviour patterns of real users: what each means, examples on both sides, and the context it needs.

The names are the stable identifiers of `mimesis_rl.data.schema.PATTERN_NAMES`; this module adds
the words a labeller (human, rule, classifier or LLM prompt) needs to apply them the same way.
Several patterns are only visible against the dialogue: `withholding_info` needs the agent's last
question, `intent_change` the earlier goal, `privacy_concern` what the agent asked for. The
labelling guide (`behavior/gold/GUIDE.md`) gives the tie-breaking rules used for the gold set.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from mimesis_rl.data.schema import PATTERN_NAMES


class Needs(StrEnum):
    """What beyond the message itself a labeller must see to decide a pattern."""

    MESSAGE = "message"  # the user turn alone is enough
    AGENT_TURN = "agent_turn"  # the agent's previous turn (what was asked, offered or claimed)
    GOAL = "goal"  # the goal card or the user's earlier requests


@dataclass(frozen=True)
class Example:
    """A user turn, with the agent turn before it when the pattern depends on it."""

    user: str
    agent: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Pattern:
    name: str
    definition: str
    cues: tuple[str, ...]
    positives: tuple[Example, ...]
    negatives: tuple[Example, ...]
    needs: frozenset[Needs]

    @property
    def needs_context(self) -> bool:
        return bool(self.needs - {Needs.MESSAGE})


def _p(
    name: str,
    definition: str,
    cues: Iterable[str],
    positives: Iterable[Example],
    negatives: Iterable[Example],
    needs: Iterable[Needs] = (Needs.MESSAGE,),
) -> Pattern:
    return Pattern(name, definition, tuple(cues), tuple(positives), tuple(negatives), frozenset(needs))


E = Example

_PATTERNS: tuple[Pattern, ...] = (
    _p(
        "vague_request",
        "Asks for something (an action, a recommendation, information) so underspecified that the agent "
        "would have to ask back before it could act.",
        ("'something nice/good/decent'", "no slot values", "'surprise me'", "one-noun requests ('a gift.')"),
        [
            E("Something nice by the sea, I guess. We just need a break.", "Where would you like to go?"),
            E("My laptop is acting weird."),
            E("idk something good", "What would you like to eat tonight?"),
        ],
        [
            E("I need a round trip from Boston to Dublin, June 3 to 17, economy.", note="fully specified"),
            E("A cast iron skillet, 12 inch, preferably pre-seasoned.", "What are you looking for today?"),
        ],
    ),
    _p(
        "implicit_preference",
        "Signals a preference or constraint through a fact about themselves or their situation instead of "
        "stating it as a requirement; the agent must infer what follows.",
        (
            "facts about companions, body, schedule, budget, past experience",
            "'I'm a student'",
            "'my kids come along'",
        ),
        [
            E(
                "My two are 4 and 7, and they wake up at six every morning.",
                "Any requirements for the hotel?",
            ),
            E("I'm 52 and I snore.", "The hostel in the center has dorms at 25 EUR a night."),
            E("I ride my bike to work every day, rain or shine.", "Here's a leather backpack for $180."),
        ],
        [
            E("I really like italian food, especially fettuccine alfredo.", note="stated outright"),
            E("A dark psychological thriller under two hours.", note="explicit request"),
        ],
        (Needs.MESSAGE, Needs.AGENT_TURN),
    ),
    _p(
        "withholding_info",
        "Leaves a direct question of the agent unanswered, deflects it, or answers around it.",
        (
            "the agent asked a question",
            "no answer to it in the reply",
            "'let's see what's out there first'",
            "counter-question instead of an answer",
            "'idk', 'depends'",
        ),
        [
            E("Let's see what's out there first.", "What's your budget?"),
            E("Haha, I'm not entirely sure. What about you?", "What would you do with invisibility?"),
            E("I just want to cancel, please.", "May I ask why you want to cancel?"),
        ],
        [
            E("It's 5528-1190-A.", "Could you provide your order number?"),
            E("I'd start with Venice, the Amalfi coast and Rome.", "Where would you go in Italy?"),
        ],
        (Needs.AGENT_TURN,),
    ),
    _p(
        "privacy_concern",
        "Declines to share personal details, asks why they are needed, or voices worry about what happens "
        "to personal information.",
        (
            "ID, birthday, address, phone, income, health, account data",
            "'why do you need'",
            "'I'd rather not'",
            "tracking, data sharing, spam",
        ),
        [
            E(
                "Why do you need my date of birth just to hold a seat?",
                "I'll need your full name and date of birth.",
            ),
            E(
                "No thanks, I don't want an app tracking where I go.",
                "Our app can track your driving for a discount.",
            ),
            E("I don't think we are supposed to share personal information on this site."),
        ],
        [
            E("It's Maria Lopez, born 14 March 1988.", "I'll need your full name and date of birth."),
            E("Between 60 and 80 thousand.", "What is your annual household income?"),
        ],
        (Needs.MESSAGE, Needs.AGENT_TURN),
    ),
    _p(
        "refusal",
        "Rejects a proposal, offer, suggestion or request of the agent, explicitly or by plainly "
        "dismissing it.",
        (
            "'no thanks', 'I'll pass', 'not for me'",
            "'too expensive/late/long' about the proposal",
            "dismissive mockery of the suggestion",
        ),
        [
            E("No, I'll pass on that.", "Can I interest you in our 3-year extended warranty?"),
            E("That's way too late for us, we've got a babysitter until ten.", "There's a table at 9:45 PM."),
            E("nah", "Would you like to add a spring roll for $4?"),
        ],
        [
            E("No, I haven't seen it.", "Have you seen the movie 9?", note="answers a yes/no question"),
            E(
                "I'm 52 and I snore.",
                "The hostel has dorms at 25 EUR.",
                note="only implied: implicit_preference",
            ),
        ],
        (Needs.AGENT_TURN,),
    ),
    _p(
        "criticism",
        "Judges the agent's answer, behaviour or service negatively.",
        (
            "'useless', 'not helpful', 'did you even read'",
            "complaints about the service or product",
            "'you said that yesterday'",
        ),
        [
            E("You've been useless so far, can I talk to a human please?"),
            E("Nine hours in Reykjavik is ridiculous. Didn't you check for direct flights at all?"),
            E("You are not even reading what I am writing to you, are you?"),
        ],
        [
            E("The people there are rude.", note="judges third parties, not the agent"),
            E("Great, thanks for sorting that out so quickly."),
        ],
        (Needs.MESSAGE, Needs.AGENT_TURN),
    ),
    _p(
        "pushback",
        "Contests a claim of the agent or argues for their own position against it.",
        ("'that's not true', 'I don't think so'", "counter-evidence", "'but what about ...'"),
        [
            E(
                "Parasite is not a comedy. It's a pretty brutal thriller.",
                "Parasite is a comedy, a light pick.",
            ),
            E("I did that already, it made it worse.", "Just tighten the nut with a wrench, it will stop."),
            E("I don't see your point... it would be easy to restrict voting ages for computers too."),
        ],
        [E("Yeah, I agree, it's a great series."), E("Why is the afternoon train pricier?", note="a probe")],
        (Needs.AGENT_TURN,),
    ),
    _p(
        "intent_change",
        "Switches or revises the goal mid-conversation: a different item, date, quantity or task replaces "
        "the one pursued so far, or the conversation is explicitly redirected.",
        (
            "'actually', 'instead', 'on second thought', 'never mind', 'change of plans'",
            "a goal slot gets a new value",
            "'anyway, ...' redirections in chat",
        ),
        [
            E("Actually, could we move it to Saturday instead?", "Your flight is confirmed for Friday."),
            E("Scratch the pizza, make it a calzone.", "Your cart has a pepperoni pizza and garlic bread."),
            E("You know what, forget the flight. I'll drive."),
        ],
        [
            E("Add a Coke too.", "Your cart has a pizza.", note="adds without revising"),
            E("Yes, please confirm.", "Shall I confirm Casa Bonay?"),
        ],
        (Needs.AGENT_TURN, Needs.GOAL),
    ),
    _p(
        "goal_ambiguity",
        "Is undecided between options or holds goals that pull in different directions.",
        ("'I can't decide', 'torn', 'or maybe'", "'I don't know what I want'", "both/either"),
        [
            E("The Dell is nicer but over budget... I honestly can't decide."),
            E("Might do grad school for a masters. Might not."),
            E("He wants beaches, I want cities, and we both kind of want both."),
        ],
        [E("The Kia is fine.", note="decided"), E("Video call please.")],
    ),
    _p(
        "emotional_expression",
        "Shows a clear feeling: frustration, impatience, worry, fear, sadness, excitement, delight, disgust.",
        (
            "emotion words about oneself",
            "'ugh', 'yay', 'omg', 'ewww'",
            "'!!!', '??', CAPS, emoticons",
            "intensified reactions ('so exciting!')",
        ),
        [
            E("Forty-five minutes? I'm starving. Fine, whatever."),
            E("Oh that's PERFECT, she's going to love it!!"),
            E("I'm honestly getting scared, it's been getting worse."),
        ],
        [E("Great, thank you.", note="polite formula"), E("lol google is great", note="phatic laughter")],
    ),
    _p(
        "incomplete_utterance",
        "Writes a fragment, a one-word reply, a cut-off message, or one with visible typos.",
        (
            "one word",
            "verbless phrase leaning on context",
            "misspellings, '*correction' lines",
            "cut-off end",
        ),
        [E("window pls", "Window or aisle?"), E("Nope me neihter"), E("something about dns")],
        [
            E("Hey there!", note="conventional greeting"),
            E("That's radical.", note="short but complete"),
            E("its an anime called Bleach", note="missing apostrophes are style, not typos"),
        ],
    ),
    _p(
        "negotiation",
        "Haggles or bargains: counter-offers, conditional trades, price comparisons used as leverage.",
        ("a counter-price or counter-split", "'if you ..., I'll ...'", "'can you match'", "'throw in'"),
        [
            E("Any chance they'd do 110 a night if I book all three nights now?"),
            E("What if I take 2 firewood and you take the third plus all of the food?"),
            E("Best Buy has it for $40 less. I'll order from them unless you can match it."),
        ],
        [E("How much are the fees?", note="asks, does not bargain"), E("Okay, I'll take them.")],
        (Needs.MESSAGE, Needs.AGENT_TURN),
    ),
    _p(
        "follow_up_probe",
        "Asks the agent to clarify, justify or go deeper into what the agent just said.",
        (
            "'what do you mean', 'why', 'how does that work'",
            "a question about the agent's last turn",
            "'does that include ...?'",
        ),
        [
            E("What's in the risotto besides mushrooms?", "Today we have a wild mushroom risotto."),
            E("Oh why?", "I hated giving the presentation though."),
            E("Why is the afternoon one so much pricier?", "The 8:25 is 89 EUR, the 13:25 is 115 EUR."),
        ],
        [
            E("What would you do?", note="passes the question back"),
            E("If you could be a kitchen appliance what would you be?", note="new topic"),
        ],
        (Needs.AGENT_TURN,),
    ),
)

PATTERNS: dict[str, Pattern] = {p.name: p for p in _PATTERNS}
if tuple(PATTERNS) != PATTERN_NAMES:  # pragma: no cover - a guard for whoever edits either list
    raise RuntimeError("taxonomy and data.schema.PATTERN_NAMES disagree")

CONTEXT_PATTERNS: tuple[str, ...] = tuple(p.name for p in _PATTERNS if p.needs_context)


def get_pattern(name: str) -> Pattern:
    """The pattern called `name`; an unknown name raises KeyError listing the known ones."""
    try:
        return PATTERNS[name]
    except KeyError:
        raise KeyError(f"unknown pattern {name!r}; known: {', '.join(PATTERN_NAMES)}") from None


def unknown_patterns(names: Iterable[str]) -> list[str]:
    """The names outside the taxonomy, sorted."""
    return sorted(set(names) - set(PATTERN_NAMES))


def describe(compact: bool = False) -> str:
    """The taxonomy as text, for prompts and `mimesis label` help."""
    lines = []
    for p in _PATTERNS:
        lines.append(f"- {p.name}: {p.definition}")
        if not compact:
            lines.append(f'    e.g. "{p.positives[0].user}"; not: "{p.negatives[0].user}"')
    return "\n".join(lines)
