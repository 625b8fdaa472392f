"""benchmarks.verdict_probe --act cuts held-out decision windows right before the act a verdict-first
reply opens with: every domain's accepting and declining acts must be the words the card users write,
or the probe would score a token no reply starts with."""

from __future__ import annotations

import pytest

from benchmarks.verdict_probe import ACT_WORDS, act_items
from mimesis_rl.simulator.decision_windows import PROPOSAL, with_act_first
from mimesis_rl.simulator.env_data import decision_dialogues
from mimesis_rl.simulator.format import THINK_OPEN


class _Chat:
    """The chat template's part the probe uses: messages in, one prompt string out."""

    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool = False,
                            add_generation_prompt: bool = True) -> str:
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


@pytest.mark.parametrize("domain", sorted(ACT_WORDS))
def test_act_items_end_on_the_act_and_know_whether_the_card_accepts(domain: str) -> None:
    items = act_items(_Chat(), domain, 12, seed=5)
    assert items and {accepts for _, accepts in items} == {True, False}
    assert all(prompt.endswith(THINK_OPEN + "I'll") for prompt, _ in items)
    yes, noes = ACT_WORDS[domain]
    replies = [c.turns[-1] for c in with_act_first(decision_dialogues([domain], 12, seed=5))
               if c.turns[-1].meta.get("decision") == PROPOSAL]
    for reply in replies:  # each act opens on one of the probe's words
        head = reply.reasoning.split(":")[0].removeprefix("I'll")
        assert head.startswith(yes) or any(head.startswith(w) for w in noes), reply.reasoning
