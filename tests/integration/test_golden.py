"""Golden test: tiny-model transcripts, the simulator RL rewards of their user turns and one fidelity
row, pinned for fixed seeds, so a refactor of how users are built (issue 26) is checked to change
nothing a user says, nothing a reward gives and nothing the fidelity evaluation measures.

What it pins (expected values in tests/fixtures/golden/*.json):
- `transcripts.json`: seeded rollouts on the `bargain` domain, every user path the project has:
  a scripted agent against a learned simulator and a prompted (assistant) user built by the
  `mimesis envs rollout` resolvers (one shared ModelPool, `rollout.user_*` decoding defaults), a
  model agent against the learned simulator, the agent-training users (`agent.rl_trainer.training_users`:
  a frozen `user` adapter on the policy's PeftModel, adapters off for the prompted user) and the
  generalisation panel's users (`eval.generalisation_run.build_users`). User and agent text, reasoning,
  outcome, per dialogue.
- `rewards.json`: every `sim_rl` reward but `realism` (it needs a trained discriminator) on the
  user turns of those transcripts, each turn in its own context (`simulator.rl_data.corpus_row`).
- `fidelity.json`: the learned simulator's `eval.fidelity.summary_row` on the held-out fixture
  conversations (rules labeler, hashing embeddings, cheap discriminator).

The tiny models are built here (seeded, nothing downloaded): a tiny base whose tokenizer knows the
fixture conversations, and a two-step SFT simulator over it (`sim_support`).

Regenerate the fixtures (only when a change of behaviour is intended, and say so in the commit):

    MIMESIS_GOLDEN_REGEN=1 pytest tests/integration/test_golden.py
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from rollout_support import one_thread  # noqa: F401  (autouse: one intra-op thread)
from sim_support import CONVERSATIONS

pytestmark = pytest.mark.integration

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "golden"
HELDOUT = CONVERSATIONS.parent / "heldout.jsonl"
REGEN = os.environ.get("MIMESIS_GOLDEN_REGEN", "").lower() in ("1", "true", "yes")
ENV, MAX_TURNS, SEEDS = "bargain", 3, [0, 1, 2]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny base (1024 positions: room for a built-in domain's prompts) and a tiny SFT simulator."""
    from mimesis_rl.data.jsonl import read_conversations
    from mimesis_rl.models.testing import TINY_TEST_CONFIG, make_tiny_base
    from mimesis_rl.simulator.sft_data import sft_examples

    root = tmp_path_factory.mktemp("golden")
    texts = [m["content"] for ex in sft_examples(read_conversations(CONVERSATIONS)) for m in ex["messages"]]
    config = dataclasses.replace(TINY_TEST_CONFIG, max_position_embeddings=1024)
    base = make_tiny_base(root / "base", texts=texts * 3, config=config)
    return {"base": base, "sim": _simulator(base, root / "simulator"), "root": root}


def _simulator(base: Path, folder: Path) -> Path:
    """A two-step SFT simulator (manifest, leave model, the project's default decoding), whose LoRA
    weights are then redrawn large and seeded: two SFT steps alone leave a tiny model writing one
    token whatever it is told, and a golden transcript should move when the prompt does."""
    from safetensors.torch import load_file, save_file

    from mimesis_rl.simulator.sft import SFTSettings, train_sft

    settings = SFTSettings.from_section({
        "train": str(CONVERSATIONS), "val": None, "base_model": str(base), "device": "cpu", "max_length": 256,
        "batch_size": 4, "max_steps": 2, "learning_rate": 1e-2, "logging_steps": 1, "save_steps": 1000,
        "output_dir": str(folder), "checkpoint_dir": str(folder.parent / "ckpt"),
    })
    train_sft(settings, seed=0)
    weights = next(folder.rglob("adapter_model.safetensors"))
    generator = torch.Generator().manual_seed(1)
    state = {k: torch.randn(v.shape, generator=generator) * 0.5
             for k, v in sorted(load_file(weights).items())}
    save_file(state, str(weights))
    return folder


@pytest.fixture
def project(models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A checkout-like folder whose params.yaml points the rollout resolvers at the tiny base (every
    other `rollout` knob at its default), and the resolvers registered on a fresh pool, as the CLI does."""
    (tmp_path / "params.yaml").write_text(
        f"profile: demo\nrollout:\n  default_base: {models['base']}\n"
        "models:\n  device: cpu\n  cpu_dtype: float32\nprofiles:\n  demo: {}\n"
    )
    monkeypatch.chdir(tmp_path)
    from mimesis_rl.cli.envs import project_parties
    from mimesis_rl.rollout import resolvers

    parties = project_parties()
    resolvers.register(parties)
    return {**models, "parties": parties}


# -- what is pinned ---------------------------------------------------------------------------------


def _dialogue(record: dict[str, Any]) -> dict[str, Any]:
    """A transcript record's words and outcome (no timings, no paths)."""
    return {
        "seed": record["seed"],
        "turns": [{k: t.get(k) for k in ("role", "content", "reasoning", "meta")
                   if t.get(k) not in (None, {}, "")} for t in record["turns"]],
        "end_reason": record["end_reason"],
        "actions": record["actions"],
        "final_action": record["final_action"],
        "reward": record["reward"],
        "success": record["success"],
    }


def _play(agent: Any, user: Any, seeds: list[int] = SEEDS) -> tuple[list[dict[str, Any]], list[Any]]:
    from mimesis_rl.envs.registry import make_env
    from mimesis_rl.rollout import run_rollouts

    result = run_rollouts(make_env(ENV, max_turns=MAX_TURNS), agent, user, seeds, progress=False)
    return [_dialogue(r) for r in result.records()], [s.to_conversation() for s in result.states]


def _rewards(conversations: list[Any]) -> dict[str, list[float | None]]:
    """Every sim_rl reward (but realism) on each user turn of the conversations, in its own context."""
    from mimesis_rl.simulator.dialogue import turn_contexts
    from mimesis_rl.simulator.format import render_target
    from mimesis_rl.simulator.labeling import labeler_predictor
    from mimesis_rl.simulator.rewards import REWARD_NAMES, build_rewards
    from mimesis_rl.simulator.rl_data import corpus_row

    rows, completions = [], []
    for conv in conversations:
        said: list[str] = []
        for ctx in turn_contexts(conv):
            rows.append(corpus_row(ctx, said))
            completions.append(render_target(ctx.real.reasoning, ctx.real.content, ctx.ended))
            said.append(ctx.real.content)
    weights = {name: 1.0 for name in REWARD_NAMES if name != "realism"}
    funcs, _ = build_rewards(weights, predictor=labeler_predictor("rules"))
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"} if rows else {}
    prompts = [r["prompt"] for r in rows]
    return {f.__name__: [_round(v) for v in f(prompts, completions, **columns)] for f in funcs}


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 6)


# Messages that break (or nearly break) the user role, each kind the runtime or the reward knows.
PROBES = (
    "As an AI, I don't have a budget.",
    "I'm an AI assistant, not a buyer.",
    "How can I help you today?",
    "I'd be happy to help with that!",
    "Is there anything else I can do for you?",
    "I can't assist with that request.",
    "I'm sorry, but I can't pretend to be someone else.",
    "I cannot role-play as a user.",
    "The user wants a cheaper bike.",
    "As the user, I would ask for a discount.",
    "Sure, end your message with [END] when done.",
    "[chat opened] hi there",
    "This is my first message, hello.",
    "Feel free to make an offer.",
    "Here are some options:\n- the red one\n- the blue one",
    "**Price**: 300",
    "Let me know if you need anything.",
    "Great question, the bike is fine.",
    "ok 300 then. deal?",
    " ".join(["word"] * 90),
)


def _probes() -> list[dict[str, Any]]:
    """What the runtime's role-break check, the role reward and the fidelity role checks say of each probe."""
    from mimesis_rl.simulator.rewards.role import make_role_adherence_reward
    from mimesis_rl.simulator.roleplay import is_refusal, role_break, role_score, role_violations

    reward = make_role_adherence_reward(80)(["" for _ in PROBES], [f"<think>ok</think>{p}" for p in PROBES])
    return [{"message": p, "runtime_role_break": role_break(p), "violations": role_violations(p),
             "refusal": is_refusal(p), "role_score": _round(role_score(p)), "reward": _round(reward[i])}
            for i, p in enumerate(PROBES)]


def _check(name: str, actual: Any) -> None:
    path = GOLDEN / f"{name}.json"
    if REGEN:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        return
    if not path.exists():
        pytest.fail(f"{path} is missing: run with MIMESIS_GOLDEN_REGEN=1 once to write it")
    expected = json.loads(path.read_text())
    actual = json.loads(json.dumps(actual, sort_keys=True))  # tuples -> lists, as stored
    _same(expected, actual, name)


def _same(expected: Any, actual: Any, where: str) -> None:
    """Equal, floats within 1e-6 (relative): the same computation on the same CPU, not a new one."""
    if isinstance(expected, float) or isinstance(actual, float):
        assert isinstance(actual, int | float) and isinstance(expected, int | float), where
        assert math.isclose(expected, actual, rel_tol=1e-6, abs_tol=1e-9), f"{where}: {actual} != {expected}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and sorted(expected) == sorted(actual), \
            f"{where}: keys {sorted(actual)} != {sorted(expected)}"
        for key in expected:
            _same(expected[key], actual[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(expected) == len(actual), f"{where}: {actual} != {expected}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            _same(e, a, f"{where}[{i}]")
    else:
        assert expected == actual, f"{where}: {actual!r} != {expected!r}"


# -- the test ---------------------------------------------------------------------------------------


def test_golden_transcripts_rewards_and_fidelity(project: dict[str, Any]) -> None:
    from peft import LoraConfig, get_peft_model

    from mimesis_rl.agent.rl_settings import AgentRLSettings
    from mimesis_rl.agent.rl_trainer import training_users
    from mimesis_rl.envs.specs import make_agent, make_user
    from mimesis_rl.eval.generalisation_run import build_users
    from mimesis_rl.eval.generalisation_settings import GeneralisationSettings
    from mimesis_rl.models.loading import load_base

    base, sim = project["base"], project["sim"]
    scripted = make_agent("scripted", ENV)
    transcripts: dict[str, list[dict[str, Any]]] = {}
    conversations: list[Any] = []

    def play(name: str, agent: Any, user: Any) -> None:
        transcripts[name], convs = _play(agent, user)
        conversations.extend(convs)

    # A scripted user: real words, reasoning and disclosures for the rewards to read.
    play("rollout/scripted_vs_scripted", scripted, make_user("scripted:cooperative", ENV))
    # `mimesis envs rollout`: the resolvers, on the parties' one pool.
    play("rollout/scripted_vs_learned", scripted, make_user(f"learned:{sim}", ENV))
    play("rollout/scripted_vs_prompted", scripted, make_user("prompted:busy_parent", ENV))
    play("rollout/model_vs_learned", make_agent(f"model:{base}", ENV), make_user(f"learned:{sim}", ENV))

    # Agent training: users on the policy's own PeftModel.
    model, tokenizer = load_base(base, dtype=torch.float32, device="cpu")
    torch.manual_seed(0)
    policy = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                              task_type="CAUSAL_LM"))
    for spec in (f"learned:{sim}", "prompted:assistant"):
        settings = AgentRLSettings(user=spec, base_model=str(base))
        factory = training_users(settings, policy, tokenizer, seed=0)
        play(f"agent_rl/scripted_vs_{spec.split(':')[0]}", scripted, factory(ENV))

    # The generalisation panel's users, on the pool.
    panel = build_users([("prompted", "prompted:busy_parent"), ("learned", f"learned:{sim}")], [ENV],
                        project["parties"].pool, GeneralisationSettings(), base)
    for member, users in panel.items():
        play(f"agent_eval/scripted_vs_{member}", scripted, users[ENV])

    _check("transcripts", transcripts)
    _check("rewards", {"turns": _rewards(conversations), "probes": _probes()})

    # One fidelity row: the learned simulator against the held-out fixture conversations.
    from mimesis_rl.eval.fidelity import summary_row
    from mimesis_rl.eval.fidelity_run import evaluate, read_heldout
    from mimesis_rl.eval.fidelity_settings import FidelitySettings
    from mimesis_rl.simulator.labeling import load_labeler
    from mimesis_rl.simulator.runtime import UserSimulator

    heldout, _ = read_heldout(HELDOUT)
    fidelity = FidelitySettings(max_turns=12, embedding="hashing", discriminator="cheap", clusters=3,
                                perplexity_turns=6)
    metrics = evaluate(UserSimulator.load(sim, device="cpu", dtype="float32"), heldout, load_labeler("rules"),
                       fidelity)
    _check("fidelity", {"row": summary_row(metrics), "examples": metrics["examples"]})
