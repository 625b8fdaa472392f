"""support: home-internet troubleshooting with a hidden root cause and vague symptom reports.

The agent knows the troubleshooting table (which checks tell which causes apart); the user only
knows what they see and reports it vaguely. The agent must ask the user to run checks, read the
answers and name the root cause. Every cause has a unique signature, so three or four good
checks always suffice; users who skip checks or argue make that harder.
"""

from __future__ import annotations

import random
import re
from typing import Any

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.protocols import Action, ActionSpec, EpisodeState, Observation, Verdict
from mimesis_rl.envs.scripted.agent import agent_texts, all_user_text, user_texts
from mimesis_rl.envs.scripted.user import Say, UserPolicy, UserSession
from mimesis_rl.envs.task_env import Scenario, TaskEnv, action_specs

# check -> (question the agent asks, what the user says when true, when false)
CHECKS: dict[str, tuple[str, str, str]] = {
    "other_devices": (
        "Do other devices in your home have the same problem?",
        "My phone has the same problem.",
        "My phone works fine, it's just the laptop.",
    ),
    "ethernet": (
        "Does it work if you plug the laptop in with an ethernet cable?",
        "With the cable it works fine.",
        "Even with the cable it doesn't work.",
    ),
    "lights": (
        "Are all the lights on the router green and normal?",
        "The router lights look normal, all green.",
        "One of the router lights is red.",
    ),
    "restart": (
        "Does restarting the router fix it for a while?",
        "Restarting the router fixes it for an hour or so.",
        "Restarting the router doesn't help.",
    ),
    "some_sites": (
        "Do only some websites fail while others load?",
        "Some websites load but others just don't.",
        "No website loads at all.",
    ),
    "near_router": (
        "Is it better when you sit right next to the router?",
        "Right next to the router it's much better.",
        "It's the same next to the router.",
    ),
    "vpn_off": (
        "Does it work when you switch the VPN off?",
        "With the VPN off everything works.",
        "Switching the VPN off changes nothing.",
    ),
    "plugged_in": (
        "Does it work when the laptop is plugged into power?",
        "When the laptop is plugged in it works.",
        "Plugged in or not, no difference.",
    ),
}
# cause -> the checks that come out true (all others are false)
CAUSES: dict[str, frozenset[str]] = {
    "isp_outage": frozenset({"other_devices"}),
    "router_firmware": frozenset({"other_devices", "lights", "restart"}),
    "dns": frozenset({"other_devices", "lights", "some_sites"}),
    "wifi_interference": frozenset({"other_devices", "ethernet", "lights", "near_router"}),
    "network_driver": frozenset({"ethernet", "lights"}),
    "vpn_conflict": frozenset({"lights", "vpn_off"}),
    "power_saving": frozenset({"lights", "plugged_in"}),
}
CAUSE_TEXT = {
    "isp_outage": "an outage at the internet provider",
    "router_firmware": "the router's firmware (update it)",
    "dns": "broken DNS settings",
    "wifi_interference": "Wi-Fi interference (change the channel)",
    "network_driver": "the laptop's Wi-Fi driver (reinstall it)",
    "vpn_conflict": "the VPN client conflicting with the connection",
    "power_saving": "the laptop's power-saving mode switching Wi-Fi off",
}
SYMPTOMS = (
    "My internet is acting weird.",
    "The Wi-Fi keeps dropping.",
    "Nothing works online, help.",
    "Internet's broken again.",
)
ASK_WORDS: dict[str, str] = {
    "other_devices": r"other devices?|phone|another device",
    "ethernet": r"ethernet|cable|wired",
    "lights": r"lights?|led",
    "restart": r"restart|reboot|turn it off and on",
    "some_sites": r"some (web)?sites|websites?|some pages",
    "near_router": r"next to the router|near the router|closer to the router",
    "vpn_off": r"\bvpn\b",
    "plugged_in": r"plugged in|power|charger|battery",
}


def observation(check: str, seen: bool) -> str:
    """What a user who ran `check` says they saw (the scripted user's answer, the card's fact)."""
    _, yes, no = CHECKS[check]
    return yes if seen else no


def consistent(answers: dict[str, bool]) -> list[str]:
    """Causes that agree with every check result seen so far."""
    return [c for c, sig in CAUSES.items() if all((check in sig) == v for check, v in answers.items())]


class SupportEnv(TaskEnv):
    name = "support"
    description = "Troubleshoot home internet: find the hidden root cause behind vague symptoms."
    max_turns = 8
    actions = action_specs(
        ActionSpec(
            "resolve",
            "final",
            {"cause": "str"},
            doc="name the root cause (one id from the table)",
            example='<action>{"type": "resolve", "cause": "dns"}</action>',
        ),
    )

    @classmethod
    def card_facts(cls, slots: dict[str, Any]) -> dict[str, Any]:
        """What the user sees, in the words the user says it: each check as the observation they report
        ("My phone has the same problem."), not `other_devices: True`, and not the hidden cause the
        agent is there to find. Asked about a check, the simulator can then copy its answer from its
        card (the evidence SFT model answered no support check in 4 of 4 dialogues; issue 27). A card
        without this environment's checks (a corpus conversation about support) stays as it is."""
        checks = slots.get("checks")
        if not isinstance(checks, dict) or not set(checks) <= set(CHECKS):
            return dict(slots)
        facts = {k: v for k, v in slots.items() if k not in ("cause", "checks")}
        facts.update({name.replace("_", " "): observation(name, seen).rstrip(".")
                      for name, seen in checks.items()})
        return facts

    def sample(self, rng: random.Random) -> Scenario:
        cause = rng.choice(sorted(CAUSES))
        goal = GoalCard(
            text=(
                "Your home internet is not working properly and you want it fixed. You are not technical: "
                "you describe what you see, and do the checks the agent asks for. You find some checks "
                "tedious."
            ),
            slots={"cause": cause, "checks": {c: c in CAUSES[cause] for c in CHECKS}},
        )
        return Scenario(
            goal=goal, public={"causes": sorted(CAUSES), "checks": {c: q for c, (q, _, _) in CHECKS.items()}}
        )

    def intro(self, scenario: Scenario) -> str:
        lines = [
            "You are a home-internet support agent. Ask the customer to run checks, one or two at a time, "
            "and name the root cause. Possible causes and the checks that come out YES for each "
            "(all other checks come out NO):"
        ]
        lines += [
            f"- {c}: {CAUSE_TEXT[c]}; yes: {', '.join(sorted(sig)) or '(none)'}" for c, sig in CAUSES.items()
        ]
        lines += ["", "Checks:"] + [f"- {c}: {q}" for c, (q, _, _) in CHECKS.items()]
        return "\n".join(lines)

    def check_action(self, state: EpisodeState, action: Action) -> str | None:
        if action.args["cause"] not in CAUSES:
            return f"unknown cause {action.args['cause']!r}; one of: {', '.join(sorted(CAUSES))}"
        return None

    def score(self, state: EpisodeState) -> Verdict:
        if state.final_action is None:
            return Verdict(reward=0.0, success=False, scores={"correct": 0.0}, notes="no diagnosis")
        ok = state.final_action.args["cause"] == state.goal.slots["cause"]
        return Verdict(reward=float(ok), success=ok, scores={"correct": float(ok)})


class SupportUser(UserPolicy):
    domain = "support"
    actions = SupportEnv.actions
    slot_labels = {c: f"{c.replace('_', ' ')} check" for c in CHECKS}
    fact_slots = tuple(CHECKS)
    ask_patterns = ASK_WORDS

    def vague_opening(self, s: UserSession) -> str:
        return s.rng.choice(SYMPTOMS)

    def fact_text(self, s: UserSession, slot: str) -> str:
        return observation(slot, s.slots["checks"][slot])

    def answer(self, s: UserSession, say: Say, slot: str, message: str) -> bool:
        if slot in s.told and s.knobs.pushback and s.chance(s.knobs.pushback):
            say.say("I already told you that. Can't you just fix it?", "pushback", "criticism")
            say.think("We've been over this; I'm annoyed they're asking again.")
            say.mood = "neg"
            return False
        if slot not in s.told and s.knobs.pushback and s.chance(s.knobs.pushback / 2):
            say.say("Why would that matter? I've had this router for years.", "follow_up_probe")
            say.think(
                f"I don't see why the {slot.replace('_', ' ')} check matters; I want them to justify it."
            )
            return False
        return super().answer(s, say, slot, message)


_STATEMENTS: list[tuple[str, bool, re.Pattern[str]]] = [
    (check, value, re.compile(re.escape(text[:-1].rstrip(".")), re.IGNORECASE))
    for check, (_, yes, no) in CHECKS.items()
    for value, text in ((True, yes), (False, no))
]


# A bare yes or no, as people answer a yes/no question: read as the answer to the one check just asked.
_YES = re.compile(r"^\W*(yes|yeah|yep|yup|it does|they do|sure|correct)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(no|nope|nah|not really|it doesn't|they don't|doesn't|don't)\b", re.IGNORECASE)


# A statement that restates the asked check in the user's own words ("My other devices have the same
# problem", "It doesn't work with the cable either"): its polarity is the answer, negated or not.
_NEGATION = re.compile(r"\b(not|no|never|nothing|none|neither|nor)\b|n't\b|n’t\b", re.IGNORECASE)


def _polarity_answers(obs: Observation) -> dict[str, bool]:
    """Checks answered right after the agent asked that check alone: a bare yes or no, or a statement
    about the check's subject in other words than the scripted user's (read by its negation)."""
    found: dict[str, bool] = {}
    messages = obs.messages[1:]
    for asked, reply in zip(messages, messages[1:], strict=False):
        if asked["role"] != "assistant" or reply["role"] != "user":
            continue
        checks = [c for c, (question, _, _) in CHECKS.items() if question in asked["content"]]
        text = reply["content"].strip()
        if len(checks) != 1 or any(p.search(text) for _, _, p in _STATEMENTS):
            continue
        if _YES.search(text):
            found[checks[0]] = True
        elif _NO.search(text):
            found[checks[0]] = False
        elif "?" not in text and re.search(ASK_WORDS[checks[0]], text, re.IGNORECASE):
            found[checks[0]] = not _NEGATION.search(text)
    return found


def _answers(obs: Observation) -> dict[str, bool]:
    """The checks the user has answered: the statements they made, or a bare yes/no to one check."""
    text = all_user_text(obs)
    found = _polarity_answers(obs)
    for check, value, pattern in _STATEMENTS:
        if pattern.search(text):
            found[check] = value
    return found


def _best_check(candidates: list[str], asked: dict[str, int], answers: dict[str, bool]) -> str | None:
    """The unanswered check that splits the remaining causes most evenly (asked least so far)."""
    options = []
    for check in CHECKS:
        if check in answers:
            continue
        yes = sum(check in CAUSES[c] for c in candidates)
        balance = min(yes, len(candidates) - yes)
        if balance:
            options.append((-balance, asked.get(check, 0), check))
    return min(options)[2] if options else None


def agent_policy(obs: Observation) -> str:
    """Ask the most informative check until one cause is left (or messages run out), then resolve."""
    answers = _answers(obs)
    candidates = consistent(answers) or list(CAUSES)
    asked = {c: sum(q in t for t in agent_texts(obs)) for c, (q, _, _) in CHECKS.items()}
    check = _best_check(candidates, asked, answers)
    if len(candidates) > 1 and check is not None and obs.turns_left > 1:
        question = CHECKS[check][0]
        if asked[check] and user_texts(obs):
            return f"I need this to narrow it down, so please bear with me: {question}"
        return question
    cause = candidates[0]
    return f'It looks like {CAUSE_TEXT[cause]}. <action>{{"type": "resolve", "cause": "{cause}"}}</action>'
