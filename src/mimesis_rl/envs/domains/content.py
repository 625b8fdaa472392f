"""content: film recommendations with negative feedback and shifting taste.

The user wants a film of some genre and mood and has already seen a few. They start vague,
say what is wrong with each suggestion (not always what would be right), and may shift taste
halfway. Each rejected suggestion costs reward; success is a film the user accepts that fits
their taste at that moment.
"""

from __future__ import annotations

import random
import re
from typing import Any

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.actions import parse_message
from mimesis_rl.envs.protocols import Action, ActionSpec, EpisodeState, Observation, ParsedMessage, Verdict
from mimesis_rl.envs.scripted.agent import agent_texts, times_asked, user_texts
from mimesis_rl.envs.scripted.user import Say, UserPolicy, UserSession
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs

GENRES = ("comedy", "drama", "thriller", "sci-fi", "documentary", "animation")
MOODS = ("light", "dark", "thoughtful")
WORDS = (
    "Silent",
    "Golden",
    "Last",
    "Hidden",
    "Broken",
    "Electric",
    "Paper",
    "Winter",
    "Midnight",
    "Lucky",
    "River",
    "Glass",
    "Iron",
    "Velvet",
    "Distant",
    "Little",
)
NOUNS = (
    "Harbor",
    "Garden",
    "Signal",
    "Empire",
    "Summer",
    "Machine",
    "Road",
    "Tide",
    "Letters",
    "Orbit",
    "Kingdom",
    "Frontier",
)
MOOD_CUES = {
    "light": "something fun and easy",
    "dark": "something gritty and intense",
    "thoughtful": "something that makes me think",
}
MOOD_WORDS = {
    "light": r"\blight\b|fun and easy|too (dark|heavy|serious)",
    "dark": r"\bdark\b|gritty|intense",
    "thoughtful": r"thoughtful|makes me think",
}


def build_films() -> list[dict[str, Any]]:
    """The fixed library: 4 films per (genre, mood), ids m1…m72."""
    rng = random.Random("content-films-v1")
    films = []
    for genre in GENRES:
        for mood in MOODS:
            for _ in range(4):
                films.append(
                    {
                        "id": f"m{len(films) + 1}",
                        "title": f"{rng.choice(WORDS)} {rng.choice(NOUNS)}",
                        "genre": genre,
                        "mood": mood,
                        "year": rng.randint(1975, 2024),
                    }
                )
    return films


FILMS = build_films()
BY_ID = {f["id"]: f for f in FILMS}


class ContentEnv(TaskEnv):
    name = "content"
    description = "Recommend a film; users give negative feedback, have seen some, and shift taste."
    max_turns = 8
    reject_cost = 0.15
    actions = action_specs(
        ActionSpec(
            "recommend",
            "propose",
            {"item": "str"},
            doc="suggest one film by id (the user may decline)",
            example='<action>{"type": "recommend", "item": "m12"}</action>',
        ),
    )

    @classmethod
    def card_facts(cls, slots: dict[str, Any]) -> dict[str, Any]:
        """The taste in the words the user says it and the films seen by title (as the user would know
        them, and as the agent's suggestions name them), not library ids; the possible shift of taste
        is the goal text's. A card without this environment's slots (a corpus conversation) stays."""
        if not {"genre", "mood", "seen"} <= set(slots) or not set(slots["seen"]) <= set(BY_ID):
            return dict(slots)
        return {"genre": said("genre", slots).rstrip("."), "mood": said("mood", slots).rstrip("."),
                "seen": [BY_ID[i]["title"] for i in slots["seen"]]}

    def sample(self, rng: random.Random) -> Scenario:
        genre, mood = rng.choice(GENRES), rng.choice(MOODS)
        alt = rng.choice([m for m in MOODS if m != mood])
        seen = sorted(f["id"] for f in rng.sample([f for f in FILMS if f["genre"] == genre], 4))
        goal = GoalCard(
            text=(
                f"You want to watch a {mood} {genre} film tonight, one you haven't seen (you've seen "
                f"{', '.join(BY_ID[i]['title'] for i in seen)}). You start vague. Your taste may shift to "
                f"something {alt}."
            ),
            slots={"genre": genre, "mood": mood, "seen": seen, "changeable": {"mood": sorted({mood, alt})}},
        )
        return Scenario(goal=goal, public={"films": FILMS})

    def intro(self, scenario: Scenario) -> str:
        lines = [
            "You recommend films. Find out what the user is in the mood for and suggest one film at a time "
            "until they accept one. Every declined suggestion lowers your reward.",
            "",
            "Library:",
        ]
        lines += [
            f"{f['id']} | {f['title']} ({f['year']}) | {f['genre']} | {f['mood']}"
            for f in scenario.public["films"]
        ]
        return "\n".join(lines)

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        if action.args["item"] not in BY_ID:
            return f"unknown film {action.args['item']!r}; use an id from the library, e.g. m12"
        return None

    def score(self, state: EpisodeState) -> Verdict:
        declined = sum(1 for a in state.actions if a["type"] == "recommend") - (1 if state.accepted else 0)
        action, slots = state.final_action, state.goal.slots
        if action is None or not state.accepted:
            return Verdict(
                reward=0.0, success=False, scores={"fit": 0.0, "declined": declined}, notes="nothing accepted"
            )
        film = BY_ID[action.args["item"]]
        fit = (
            film["genre"] == slots["genre"]
            and film["mood"] == slots["mood"]
            and film["id"] not in slots["seen"]
        )
        reward = max(0.2, 1.0 - self.reject_cost * declined) if fit else 0.0
        return Verdict(reward=round(reward, 6), success=fit, scores={"fit": float(fit), "declined": declined})


def said(slot: str, slots: dict[str, Any]) -> str:
    """How the user states their taste (the scripted user's answer, the card's fact)."""
    if slot == "genre":
        return f"I'm in the mood for a {slots['genre']}."
    return f"Something {slots['mood']}."


class ContentUser(UserPolicy):
    domain = "content"
    actions = ContentEnv.actions
    fact_slots = ("genre", "mood")
    ask_patterns = {
        "genre": r"genre|kind of (film|movie)|what type|comedy|drama|thriller",
        "mood": r"mood|feel like|vibe|tone|light or|dark or",
    }

    def setup(self, s: UserSession) -> None:
        s.memory["implicit_mood"] = s.chance(0.5)

    def vague_opening(self, s: UserSession) -> str:
        return s.rng.choice(
            ["Recommend me something to watch tonight.", "I'm bored, what should I watch?", "Any good films?"]
        )

    def fact_text(self, s: UserSession, slot: str) -> str:
        if slot == "mood" and s.memory.get("implicit_mood"):
            return f"I want {MOOD_CUES[s.slots['mood']]}."
        return said(slot, s.slots)

    def tell(self, s: UserSession, say: Say, slot: str, *patterns: str) -> None:
        extra = ("implicit_preference",) if slot == "mood" and s.memory.get("implicit_mood") else ()
        super().tell(s, say, slot, *patterns, *extra)

    def change_text(self, s: UserSession, slot: str, old: Any, new: Any) -> str:
        return f"Hmm, actually I'm not feeling {old} anymore. Make it something {new}."

    def on_action(self, s: UserSession, say: Say, parsed: ParsedMessage, message: str) -> None:
        if parsed.action is None:
            return
        film = BY_ID[parsed.action.args["item"]]
        offer = f"They suggest {film['title']}, a {film['mood']} {film['genre']}"
        if film["id"] in s.slots["seen"]:
            say.reject(
                f"I've seen {film['title']} already.",
                f"{offer}; I've already watched it, so it's out: I'll say no.",
            )
            return
        want = f"I want a {s.slots['mood']} {s.slots['genre']} I haven't seen"
        if film["genre"] == s.slots["genre"] and film["mood"] == s.slots["mood"]:
            say.accept(
                f"Oh, {film['title']} sounds great, I'll watch that!",
                f"{offer}; {want}, so it fits: I'll watch it.",
            )
            return
        say.reject(
            "Nah, not that one.", f"{offer}; {want}, so it doesn't fit: I'll turn it down.", "criticism"
        )
        wrong = []
        if film["genre"] != s.slots["genre"]:
            wrong.append(f"I'm not in the mood for {film['genre']}")
        if film["mood"] != s.slots["mood"]:
            wrong.append(f"it's too {film['mood']}")
        if s.chance(s.knobs.cooperativeness):
            say.say(s.rng.choice(wrong).capitalize() + ".")
        if s.chance(s.knobs.disclosure):
            self.volunteer(s, say, force=True)


_GENRE_ALT = "|".join(GENRES)
_MOOD_ALT = "|".join(MOODS)
_CUE_ALT = "|".join(f"({re.escape(cue)})" for cue in MOOD_CUES.values())
_NEGATIVE = re.compile(
    rf"not in the mood for (?:an? )?({_GENRE_ALT})|too ({_MOOD_ALT})|not feeling ({_MOOD_ALT})", re.IGNORECASE
)
_POSITIVE = re.compile(rf"\b({_GENRE_ALT}|{_MOOD_ALT})\b|{_CUE_ALT}", re.IGNORECASE)
_CUE_MOOD = {cue: mood for mood, cue in MOOD_CUES.items()}


def read_taste(text: str) -> tuple[str | None, str | None, set[str]]:
    """(genre, mood, ruled-out values) from the user's words, read in order so later words win."""
    events: list[tuple[int, str, str]] = []
    masked = text
    for m in _NEGATIVE.finditer(text):
        value = next(g for g in m.groups() if g).lower()
        events.append((m.start(), "no", value))
        masked = masked[: m.start()] + " " * (m.end() - m.start()) + masked[m.end() :]
    for m in _POSITIVE.finditer(masked):
        word = m.group(0).lower()
        events.append((m.start(), "yes", _CUE_MOOD.get(word, word)))
    genre = mood = None
    ruled_out: set[str] = set()
    for _, kind, value in sorted(events):
        if kind == "no":
            ruled_out.add(value)
            genre = None if genre == value else genre
            mood = None if mood == value else mood
        elif value in GENRES:
            genre = value
            ruled_out.discard(value)
        else:
            mood = value
            ruled_out.discard(value)
    return genre, mood, ruled_out


def agent_policy(obs: Observation) -> str:
    """Ask genre and mood, then suggest films consistent with every piece of feedback so far."""
    text = "\n".join(t for t in user_texts(obs))
    text = re.sub(r"I've seen .*? already\.", " ", text)
    genre, mood, ruled_out = read_taste(text)
    tried = [
        a.args["item"]
        for a in (parse_message(t, ContentEnv.actions).action for t in agent_texts(obs))
        if a is not None
    ]
    ask = []
    if genre is None and times_asked(obs, "which genre") < 2:
        ask.append("Which genre do you feel like: comedy, drama, thriller, sci-fi, documentary or animation?")
    if mood is None and times_asked(obs, "what mood") < 2:
        ask.append("And what mood: light, dark or thoughtful?")
    if ask and obs.turns_left > 1:
        return " ".join(ask)
    pool = [
        f
        for f in obs.public["films"]
        if f["id"] not in tried
        and f["genre"] == (genre or f["genre"])
        and f["mood"] == (mood or f["mood"])
        and f["genre"] not in ruled_out
        and f["mood"] not in ruled_out
    ]
    film = (pool or [f for f in obs.public["films"] if f["id"] not in tried])[0]
    return (
        f"How about {film['title']} ({film['year']}), a {film['mood']} {film['genre']}? "
        f'<action>{{"type": "recommend", "item": "{film["id"]}"}}</action>'
    )
