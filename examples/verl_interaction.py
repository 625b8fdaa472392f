"""Use a served MIMESIS user simulator as verl's multi-turn interaction (the user side of rollouts).

1. Serve the simulator:

    export MIMESIS_API_KEY=$(openssl rand -hex 24)
    MIMESIS_API_KEYS=$MIMESIS_API_KEY mimesis serve --model models:/mimesis-simulator@champion &

2. Point verl at `MimesisInteraction` (interaction_config.yaml, passed as
   `actor_rollout_ref.rollout.multi_turn.interaction_config_path=interaction_config.yaml`):

    interaction:
      - name: mimesis_user
        class_name: mimesis_rl.serve.adapters.verl.MimesisInteraction
        config: {base_url: "http://127.0.0.1:8000", api_key_env: MIMESIS_API_KEY}

3. Give each dataset row the user's goal in `extra_info.interaction_kwargs` (`dataset_row` below)
   and the user's opening as the row's first user message (`--write-dataset` fetches openings).

Run this file to check the wiring without verl: it plays one dialogue through the same class verl
would call, with a scripted agent, and prints it.

    python examples/verl_interaction.py --url http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

GOAL = {"text": "Return a pair of shoes that arrived in the wrong size.", "domain": "returns"}
AGENT_SYSTEM = "You are a customer-support agent. Help the customer; be brief."
AGENT_LINES = ["Hello! How can I help?", "Sorry about that. What is your order number?",
               "Thanks. Would you like a refund or a different size?", "Done. Anything else?"]


def dataset_row(opening: str, goal: dict, index: int) -> dict:
    """One verl RL row: the agent's prompt (its system prompt and the user's opening) and the goal."""
    return {"data_source": "mimesis", "prompt": [{"role": "system", "content": AGENT_SYSTEM},
                                                 {"role": "user", "content": opening}],
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {"index": index, "interaction_kwargs": {"name": "mimesis_user", "goal": goal}}}


async def dry_run(url: str, rows: int) -> None:
    from mimesis_rl.serve.adapters.verl import MimesisInteraction

    interaction = MimesisInteraction({"name": "mimesis_user", "base_url": url,
                                      "api_key_env": "MIMESIS_API_KEY"})
    iid = await interaction.start_interaction(goal=GOAL)
    messages = [{"role": "system", "content": AGENT_SYSTEM},
                {"role": "user", "content": await interaction.opening(iid)}]
    for line in AGENT_LINES:
        messages.append({"role": "assistant", "content": line})
        done, reply, score, extra = await interaction.generate_response(iid, messages)
        messages.append({"role": "user", "content": reply})
        if done:
            break
    await interaction.finalize_interaction(iid)
    for m in messages:
        print(f"{m['role']:>9}: {m['content']}")
    if rows:
        out = []
        for i in range(rows):
            iid = await interaction.start_interaction(goal=GOAL)
            out.append(dataset_row(await interaction.opening(iid, seed=i), GOAL, i))
            await interaction.finalize_interaction(iid)
        print(json.dumps(out[0], indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("MIMESIS_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--write-dataset", type=int, default=0, metavar="N", help="also build N dataset rows")
    args = parser.parse_args()
    asyncio.run(dry_run(args.url, args.write_dataset))


if __name__ == "__main__":
    main()
