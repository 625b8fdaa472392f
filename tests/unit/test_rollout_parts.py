"""Rollout pieces that need no model: ids, routing, settings, spec resolution, token records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mimesis_rl.data.schema import GoalCard
from mimesis_rl.envs.multi import MultiDomainEnv
from mimesis_rl.envs.protocols import SessionSpec, UserReply
from mimesis_rl.envs.registry import make_env
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.models.inference.generation import Generation
from mimesis_rl.models.inference.runner import derive_seed
from mimesis_rl.models.inference.sources import is_mlflow_uri, resolve_source
from mimesis_rl.models.inference.track import ChatTrack
from mimesis_rl.rollout.engine import _UniqueEpisodes
from mimesis_rl.rollout.mixed import MixedUsers
from mimesis_rl.rollout.settings import RolloutSettings


def test_repeated_episodes_get_stable_suffixes_per_domain_and_across_domains():
    env = _UniqueEpisodes(make_env("bargain"))
    assert [env.reset(s).episode_id.split("-")[-1] for s in (3, 3, 1, 3)] == ["3#0", "3#1", "1#0", "3#2"]
    plan = [("bargain", 3), ("campsite", 3), ("bargain", 3)]  # a GRPO group repeats (domain, seed)
    multi = _UniqueEpisodes(MultiDomainEnv({d: make_env(d) for d in ("bargain", "campsite")}, plan))
    ids = [multi.reset(i).episode_id for i in range(3)]
    assert ids[0].endswith("#0") and ids[2] == ids[0][:-1] + "1" and len(set(ids)) == 3


def test_derived_seeds_are_stable_and_distinct():
    assert derive_seed(0, "agent:x#0:1") == derive_seed(0, "agent:x#0:1")
    assert len({derive_seed(0, f"k{i}") for i in range(100)} | {derive_seed(1, "k0")}) == 101
    assert 0 <= derive_seed("anything") < 2**63


class _Echo:
    def __init__(self, name: str) -> None:
        self.name = name
        self.calls: list[int] = []

    def start(self, specs):
        return [f"{self.name}:{s.seed}" for s in specs]

    def opening(self, sessions):
        self.calls.append(len(sessions))
        return [UserReply(message=f"open {s}") for s in sessions]

    def respond(self, sessions, agent_messages):
        self.calls.append(len(sessions))
        return [UserReply(message=f"{s} got {m}") for s, m in zip(sessions, agent_messages, strict=True)]


def test_mixed_users_route_each_dialogue_and_call_each_side_once():
    a, b = _Echo("a"), _Echo("b")
    mixed = MixedUsers([a, b, a, b, a])
    specs = [SessionSpec(goal=GoalCard(text="g"), domain="d", seed=i) for i in range(5)]
    sessions = mixed.start(specs)
    assert [r.message for r in mixed.opening(sessions)] == [f"open {n}:{i}" for i, n in enumerate("ababa")]
    replies = mixed.respond([sessions[0], sessions[3], sessions[4]], ["x", "y", "z"])
    assert [r.message for r in replies] == ["a:0 got x", "b:3 got y", "a:4 got z"]
    assert a.calls == [3, 2] and b.calls == [2, 1]
    with pytest.raises(ValueError, match="2 sessions for 5"):
        mixed.start(specs[:2])


def test_track_records_agent_tokens_and_cuts_trailing_user_tokens():
    track = ChatTrack(prompt_ids=[1, 2, 3])
    track.add_generated(Generation(token_ids=[10, 11, 2], logprobs=[-0.5, -0.25, -0.125], stopped=True))
    track.add_external([7, 8])
    track.add_generated(Generation(token_ids=[12], logprobs=[-1.0], stopped=False))
    track.add_external([2, 9, 9])  # closing token + the user's last reply: no loss, cut from the record
    fields = track.trl_fields(end_of_turn_id=2)
    assert fields["completion_ids"] == [10, 11, 2, 7, 8, 12]
    assert fields["env_mask"] == [1, 1, 1, 0, 0, 1]
    assert fields["logprobs"] == [-0.5, -0.25, -0.125, 0.0, 0.0, -1.0]
    assert [t.stopped for t in track.turns] == [True, False]
    assert ChatTrack(prompt_ids=[1]).trl_fields(2)["completion_ids"] == [2]  # never empty (TRL reads [-1])


def test_sampling_and_settings_are_checked():
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(do_sample=True, temperature=0)
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingParams(max_new_tokens=0)
    typo = r"params.yaml: rollout.agent_tokens: unknown key \(did you mean `agent_max_new_tokens`\?\)"
    with pytest.raises(ValueError, match=typo):
        RolloutSettings.from_section({"agent_tokens": 3})
    with pytest.raises(ValueError, match="retry_temperature_step"):
        SamplingParams(retry_temperature_step=-0.1)
    hot = SamplingParams(do_sample=True, temperature=0.8, retry_temperature_step=0.3)
    assert hot.for_attempt(0) is hot  # the first sample is never changed
    assert [round(hot.for_attempt(a).temperature, 6) for a in (1, 2)] == [1.1, 1.4]
    greedy = SamplingParams(temperature=0.8, retry_temperature_step=0.3)
    assert greedy.for_attempt(2).temperature == 0.8
    assert SamplingParams(do_sample=True, temperature=0.8).for_attempt(2).temperature == 0.8
    conf = RolloutSettings.from_section({"agent_max_new_tokens": 7})
    assert conf.agent_sampling().max_new_tokens == 7 and not conf.agent_sampling().do_sample
    assert conf.user_sampling().do_sample


def test_model_folders_resolve_to_base_and_adapter(tmp_path: Path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base)}))
    nested = tmp_path / "download"
    (nested / "model").mkdir(parents=True)
    (nested / "model" / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "hub/name"}))

    assert resolve_source(str(base), tmp_path / "nowhere").adapter is None
    src = resolve_source(str(adapter), tmp_path / "nowhere")
    assert src.base == base and src.adapter == adapter
    fallback = resolve_source(str(nested), base)  # names a hub id: falls back to the default base
    assert fallback.base == base and fallback.adapter == nested / "model"
    with pytest.raises(FileNotFoundError, match="no such folder"):
        resolve_source(str(tmp_path / "missing"), base)
    assert is_mlflow_uri("models:/mimesis-agent@champion") and not is_mlflow_uri(str(base))


def test_simulator_folder_brings_its_base_adapter_decoding_and_card(tmp_path: Path):
    from mimesis_rl.models.artifact import ModelManifest, base_reference, write_manifest

    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text("{}")
    sim = tmp_path / "sim"
    (sim / "adapter").mkdir(parents=True)
    (sim / "adapter" / "adapter_config.json").write_text("{}")
    write_manifest(
        sim,
        ModelManifest(
            kind="lora", base=base_reference(base), behaviours=["refusal"], extra={"card_style": "prompted"}
        ),
    )
    src = resolve_source(str(sim), tmp_path / "nowhere")
    assert (src.base, src.adapter, src.tokenizer) == (base, sim / "adapter", base)
    assert src.manifest is not None and src.manifest.behaviours == ["refusal"]
    assert src.manifest.extra["card_style"] == "prompted"
    assert src.sampling is not None and src.sampling.do_sample and src.sampling.temperature == 0.8


def test_buffered_kv_layer_matches_concatenation():
    import torch

    from mimesis_rl.models.inference.kvcache import BufferedLayer

    torch.manual_seed(0)
    prefix_k, prefix_v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 5, 4)
    layer = BufferedLayer(spare=2, keys=prefix_k, values=prefix_v)
    ref_k, ref_v = prefix_k, prefix_v
    for n in (1, 1, 3):  # the third write outgrows the spare room and reallocates
        k, v = torch.randn(2, 3, n, 4), torch.randn(2, 3, n, 4)
        out_k, out_v = layer.update(k, v)
        ref_k, ref_v = torch.cat([ref_k, k], 2), torch.cat([ref_v, v], 2)
        assert torch.equal(out_k, ref_k) and torch.equal(out_v, ref_v)
    assert layer.get_seq_length() == 10
    layer.batch_select_indices(torch.tensor([1]))
    out_k, _ = layer.update(torch.ones(1, 3, 1, 4), torch.ones(1, 3, 1, 4))
    assert torch.equal(out_k[:, :, :10], ref_k[1:]) and out_k.shape == (1, 3, 11, 4)
