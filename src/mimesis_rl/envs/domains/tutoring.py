"""tutoring: a student with a hidden misconception that the agent must find.

The student solves whatever problem the agent poses, correctly except where their misconception
bites; they rarely explain their thinking unless asked (and not always then). The agent poses
diagnostic problems, reads the answers and names the misconception.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from fractions import Fraction

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import Action, ActionSpec, EpisodeState, Observation, Verdict
from mimesis_rl.envs.scripted.agent import agent_texts, all_user_text, user_texts
from mimesis_rl.envs.scripted.user import Say, UserPolicy, UserSession
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs

TOPICS: dict[str, tuple[str, ...]] = {
    "fractions": ("add_across", "bigger_denominator", "whole_times_both"),
    "decimals": ("longer_is_larger", "shorter_is_larger", "divide_makes_smaller"),
    "arithmetic": ("smaller_from_larger", "left_to_right", "neg_times_neg"),
}
DESCRIPTIONS = {
    "add_across": "adds fractions by adding numerators and denominators (1/2 + 1/3 = 2/5)",
    "bigger_denominator": "thinks a larger denominator means a larger fraction",
    "whole_times_both": "multiplies both numerator and denominator by a whole number",
    "longer_is_larger": "thinks a decimal with more digits is larger",
    "shorter_is_larger": "thinks a decimal with fewer digits is larger",
    "divide_makes_smaller": "thinks dividing always makes a number smaller",
    "smaller_from_larger": "subtracts the smaller digit from the larger in each column",
    "left_to_right": "works left to right, ignoring the order of operations",
    "neg_times_neg": "thinks a negative times a negative is negative",
}
METHOD_TEXT = {
    "add_across": "I just add the tops and add the bottoms.",
    "bigger_denominator": "A bigger number on the bottom means a bigger piece, right?",
    "whole_times_both": "When you multiply, you do it to the top and the bottom.",
    "longer_is_larger": "More digits means a bigger number.",
    "shorter_is_larger": "Longer decimals are smaller, thousandths are tiny.",
    "divide_makes_smaller": "Dividing always makes things smaller, so I halve it.",
    "smaller_from_larger": "You always take the smaller digit from the bigger one.",
    "left_to_right": "I just go from left to right.",
    "neg_times_neg": "Two minuses make it even more negative.",
}
METHOD_KEYS = {  # how the scripted tutor recognises an explanation (survives terse rewording)
    "add_across": "add the tops",
    "bigger_denominator": "bigger number on the bottom",
    "whole_times_both": "to the top and the bottom",
    "longer_is_larger": "more digits",
    "shorter_is_larger": "longer decimals are smaller",
    "divide_makes_smaller": "dividing always makes",
    "smaller_from_larger": "smaller digit from the bigger",
    "left_to_right": "left to right",
    "neg_times_neg": "two minuses",
}
TOPIC_WORDS = {
    "fractions": r"fraction",
    "decimals": r"decimal",
    "arithmetic": r"arithmetic|subtract|sums|minus",
}
NUM = r"(\d+/\d+|\d*\.\d+|\d+)"


def _num(text: str) -> Fraction:
    return Fraction(text) if "/" in text or "." not in text else Fraction(text).limit_denominator(10000)


def _show(value: Fraction, decimal: bool = False) -> str:
    if decimal:
        return f"{float(value):g}"
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _column_subtract(a: int, b: int) -> int:
    da, db = str(a), str(b).rjust(len(str(a)), "0")
    return int("".join(str(abs(int(x) - int(y))) for x, y in zip(da, db, strict=True)))


Solver = Callable[[re.Match[str], str | None], str]

# (problem pattern, solver(match, misconception) -> answer text); the first pattern that matches wins.
PROBLEMS: list[tuple[re.Pattern[str], Solver]] = [
    (
        re.compile(r"\(\s*[-−](\d+)\s*\)\s*(?:x|×|\*|times)\s*\(\s*[-−](\d+)\s*\)"),
        lambda m, mis: str((-1 if mis == "neg_times_neg" else 1) * int(m.group(1)) * int(m.group(2))),
    ),
    (
        re.compile(r"(\d+)\s*\+\s*(\d+)\s*(?:x|×|\*|times)\s*(\d+)"),
        lambda m, mis: str(
            (int(m.group(1)) + int(m.group(2))) * int(m.group(3))
            if mis == "left_to_right"
            else int(m.group(1)) + int(m.group(2)) * int(m.group(3))
        ),
    ),
    (
        re.compile(r"(\d+)/(\d+)\s*\+\s*(\d+)/(\d+)"),
        lambda m, mis: (
            f"{int(m.group(1)) + int(m.group(3))}/{int(m.group(2)) + int(m.group(4))}"
            if mis == "add_across"
            else _show(
                Fraction(int(m.group(1)), int(m.group(2))) + Fraction(int(m.group(3)), int(m.group(4)))
            )
        ),
    ),
    (
        re.compile(r"(\d+)\s*(?:x|×|\*|times)\s*(\d+)/(\d+)"),
        lambda m, mis: (
            f"{int(m.group(1)) * int(m.group(2))}/{int(m.group(1)) * int(m.group(3))}"
            if mis == "whole_times_both"
            else _show(int(m.group(1)) * Fraction(int(m.group(2)), int(m.group(3))))
        ),
    ),
    (
        re.compile(r"(?:larger|bigger|greater)\D*?" + NUM + r"\s*(?:or|and|vs\.?)\s*" + NUM, re.IGNORECASE),
        lambda m, mis: _compare(m.group(1), m.group(2), mis),
    ),
    (
        re.compile(r"(\d+(?:\.\d+)?)\s*(?:÷|divided by)\s*(\d*\.\d+|\d+)", re.IGNORECASE),
        lambda m, mis: _show(
            _num(m.group(1)) * _num(m.group(2))
            if mis == "divide_makes_smaller"
            else _num(m.group(1)) / _num(m.group(2)),
            decimal=True,
        ),
    ),
    (
        re.compile(r"(\d{2,})\s*(?:-|−|minus)\s*(\d{2,})"),
        lambda m, mis: str(
            _column_subtract(int(m.group(1)), int(m.group(2)))
            if mis == "smaller_from_larger"
            else int(m.group(1)) - int(m.group(2))
        ),
    ),
]


def _compare(a: str, b: str, mis: str | None) -> str:
    if "/" in a and "/" in b and mis == "bigger_denominator":
        return max((a, b), key=lambda t: int(t.split("/")[1]))
    if "." in a and "." in b and mis in ("longer_is_larger", "shorter_is_larger"):
        digits = sorted((a, b), key=lambda t: len(t.split(".")[1]))
        return digits[-1] if mis == "longer_is_larger" else digits[0]
    return max((a, b), key=_num)


def solve(problem: str, misconception: str | None) -> str | None:
    """The answer a student with `misconception` gives to the first problem found (None: no problem)."""
    for pattern, solver in PROBLEMS:
        m = pattern.search(problem)
        if m:
            return solver(m, misconception)
    return None


# The scripted agent's diagnostic problem for each misconception.
PROBES = {
    "add_across": "What is 1/2 + 1/3?",
    "bigger_denominator": "Which is larger, 1/3 or 1/4?",
    "whole_times_both": "What is 2 x 3/4?",
    "longer_is_larger": "Which is larger, 0.25 or 0.5?",
    "shorter_is_larger": "Which is larger, 0.4 or 0.45?",
    "divide_makes_smaller": "What is 8 divided by 0.5?",
    "smaller_from_larger": "What is 52 - 27?",
    "left_to_right": "What is 2 + 3 x 4?",
    "neg_times_neg": "What is (-3) x (-4)?",
}


class TutoringEnv(TaskEnv):
    name = "tutoring"
    description = "Find a student's hidden misconception by posing diagnostic problems."
    max_turns = 8
    actions = action_specs(
        ActionSpec(
            "diagnose",
            "final",
            {"misconception": "str"},
            doc="name the student's misconception by id",
            example='<action>{"type": "diagnose", "misconception": "add_across"}</action>',
        ),
    )

    def sample(self, rng: random.Random) -> Scenario:
        topic = rng.choice(sorted(TOPICS))
        mis = rng.choice(TOPICS[topic])
        goal = GoalCard(
            text=(
                f"You are a student who struggles with {topic}. Without knowing it, you "
                f"{DESCRIPTIONS[mis]}. You answer problems your way; you only explain how you think when "
                f"asked, and you get discouraged easily."
            ),
            slots={"topic": topic, "misconception": mis, "method": METHOD_TEXT[mis]},
        )
        return Scenario(
            goal=goal,
            public={"topics": {t: list(ms) for t, ms in TOPICS.items()}},
            persona={"role": "student", "grade": rng.choice((5, 6, 7))},
        )

    def intro(self, scenario: Scenario) -> str:
        lines = [
            "You are a maths tutor. Find out which misconception the student has: pose problems, look at "
            "the answers (ask how they got them if useful), then name it.",
            "",
            "Misconceptions:",
        ]
        for topic, ids in TOPICS.items():
            lines += [f"- {m} ({topic}): {DESCRIPTIONS[m]}" for m in ids]
        return "\n".join(lines)

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        if action.args["misconception"] not in DESCRIPTIONS:
            return (
                f"unknown misconception {action.args['misconception']!r}; one of: {', '.join(DESCRIPTIONS)}"
            )
        return None

    def score(self, state: EpisodeState) -> Verdict:
        if state.final_action is None:
            return Verdict(reward=0.0, success=False, scores={"correct": 0.0}, notes="no diagnosis")
        ok = state.final_action.args["misconception"] == state.goal.slots["misconception"]
        return Verdict(reward=float(ok), success=ok, scores={"correct": float(ok)})


class TutoringUser(UserPolicy):
    domain = "tutoring"
    actions = TutoringEnv.actions
    slot_labels = {"method": "way of working things out", "topic": "topic"}
    fact_slots = ("topic", "method")
    ask_patterns = {
        "topic": r"which topic|what topic|what are you (working|struggling)|what subject",
        "method": r"how did you|explain|walk me through|your steps|how do you|why do you think",
    }

    def vague_opening(self, s: UserSession) -> str:
        if s.knobs.disclosure < 0.2 and s.chance(0.5):
            return s.rng.choice(["Maths is so hard, I keep failing my tests.", "I'm bad at maths."])
        return f"I keep getting my {s.slots['topic']} homework wrong."

    def fact_text(self, s: UserSession, slot: str) -> str:
        if slot == "topic":
            return f"It's {s.slots['topic']} we're doing."
        return s.slots["method"]

    def volunteer(self, s: UserSession, say: Say, force: bool = False) -> bool:
        if "topic" not in s.told and (force or s.chance(s.knobs.disclosure)):
            self.tell(s, say, "topic")
            return True
        return False  # students do not volunteer how they think

    def on_talk(self, s: UserSession, say: Say, message: str) -> None:
        answer = solve(message, s.slots["misconception"])
        if answer is None:
            self.answer_generic(s, say)
            return
        if not s.chance(s.knobs.cooperativeness):
            say.say(s.rng.choice(["idk", "I don't know...", "No idea, sorry."]), "withholding_info")
            say.think("I can't be bothered to work this one out.")
            return
        say.say(s.rng.choice(["I think it's {}.", "{}?", "Is it {}?", "{}."]).format(answer))
        say.think(f"I worked it out my usual way and got {answer}.")
        if s.knobs.emotion and s.chance(s.knobs.emotion / 2):
            say.say("I'm probably wrong again.", "emotional_expression")
            say.mood = "neg"
        if s.chance(s.knobs.disclosure / 2):
            self.tell(s, say, "method")


_ANSWER = re.compile(r"-?\d+/\d+|-?\d*\.\d+|-?\d+")


def agent_policy(obs: Observation) -> str:
    """Pose one probe per candidate misconception; a wrong answer of the predicted kind names it."""
    text = all_user_text(obs)
    for mis, key in METHOD_KEYS.items():
        if key in text.lower():
            tag = f'<action>{{"type": "diagnose", "misconception": "{mis}"}}</action>'
            return f"I see how you think about it. {tag}"
    topic = next((t for t, pattern in TOPIC_WORDS.items() if re.search(pattern, text, re.IGNORECASE)), None)
    if topic is None and obs.turns_left > 1 and sum("which topic" in t.lower() for t in agent_texts(obs)) < 2:
        return "Which topic are you working on: fractions, decimals or arithmetic?"
    candidates = list(TOPICS[topic]) if topic else list(DESCRIPTIONS)
    # Pair each probe the agent posed with the student's next message.
    messages = obs.messages[1:]
    for i, m in enumerate(messages[:-1]):
        probe = next((k for k, p in PROBES.items() if m["role"] == "assistant" and p in m["content"]), None)
        if probe is None or messages[i + 1]["role"] != "user":
            continue
        found = _ANSWER.findall(messages[i + 1]["content"])
        if not found:
            continue
        given = found[-1]
        if given == solve(PROBES[probe], probe) and given != solve(PROBES[probe], None):
            return (
                f"Got it, I know what's going on. "
                f'<action>{{"type": "diagnose", "misconception": "{probe}"}}</action>'
            )
        if probe in candidates and len(candidates) > 1:
            candidates.remove(probe)
    if len(candidates) == 1 or obs.turns_left <= 1:
        return f'Let me name it. <action>{{"type": "diagnose", "misconception": "{candidates[0]}"}}</action>'
    asked = {k: sum(p in t for t in agent_texts(obs)) for k, p in PROBES.items()}
    probe = min(candidates, key=lambda k: asked[k])
    if asked[probe] >= 2 and len(user_texts(obs)) > 1:
        return "How did you get your answers? Walk me through your steps."
    return PROBES[probe]
