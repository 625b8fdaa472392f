"""Train an agent with TRL's GRPOTrainer against a served MIMESIS user simulator.

    export MIMESIS_API_KEY=$(openssl rand -hex 24)
    MIMESIS_API_KEYS=$MIMESIS_API_KEY mimesis serve --model models:/mimesis-simulator@champion &
    python examples/trl_rollout.py --url http://127.0.0.1:8000 --policy models/base --steps 2

Each training prompt is the agent's own system prompt plus a task tag; `goal_for` maps the tag to
the user's goal card, which only the simulator sees. The rollout function plays whole dialogues
(the policy as the agent, the server as the user) and TRL trains on the agent's tokens only
(`env_mask`). The reward here is a stand-in (the user stayed to the end, and short turns): put the
task's own verifier in its place.
"""

from __future__ import annotations

import argparse
import os

GOALS = {
    "jacket": {"text": "Buy a waterproof hiking jacket, green if possible, under 120 euros.",
               "domain": "shopping"},
    "wifi": {"text": "Get your laptop's wifi working again (it broke after an update).",
             "domain": "support"},
    "trip": {"text": "Book a cheap weekend trip to the coast in May.", "domain": "travel"},
}
AGENT_PROMPT = "You are a helpful assistant. Find out what the customer needs, then help them. Task: {task}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("MIMESIS_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--policy", default="models/base", help="the agent model to train (HF folder or id)")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=3)
    parser.add_argument("--output-dir", default="/tmp/mimesis-trl-example")
    args = parser.parse_args()

    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from mimesis_rl.serve.adapters import SimulatorClient
    from mimesis_rl.serve.adapters.trl import make_rollout_func

    client = SimulatorClient(args.url)  # api key from $MIMESIS_API_KEY
    print("simulator:", client.models())

    def goal_for(prompt: list[dict[str, str]]) -> dict:
        return GOALS[prompt[0]["content"].rsplit("Task: ", 1)[1]]

    def user_stayed(completions: list, user_left: list[bool], **_: object) -> list[float]:
        """Stand-in reward: 1 when the user did not walk out, minus a little for long completions."""
        return [float(not left) - 0.001 * len(c[0]["content"])
                for c, left in zip(completions, user_left, strict=True)]

    data = Dataset.from_list([{"prompt": [{"role": "system", "content": AGENT_PROMPT.format(task=t)}]}
                              for t in GOALS for _ in range(2)])
    tok = AutoTokenizer.from_pretrained(args.policy, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(args.policy)
    config = GRPOConfig(output_dir=args.output_dir, per_device_train_batch_size=4, num_generations=4,
                        max_steps=args.steps, max_completion_length=256, learning_rate=1e-5, use_cpu=True,
                        report_to=[], logging_steps=1, save_strategy="no", beta=0.0)
    trainer = GRPOTrainer(model=model, reward_funcs=user_stayed, args=config, train_dataset=data,
                          processing_class=tok,
                          rollout_func=make_rollout_func(client, goal_for=goal_for, max_turns=args.max_turns,
                                                         max_new_tokens=48))
    trainer.train()
    for row in trainer.state.log_history:
        print(row)


if __name__ == "__main__":
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    main()
