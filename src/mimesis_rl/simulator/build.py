"""One way to build a user: `build_user(spec, backend, decoding)`.

    build_user("learned:models:/mimesis-simulator@champion", PoolBackend(pool, base), UserDecoding())
    build_user("prompted:busy_parent", PolicyBackend(policy, tokenizer, base), UserDecoding(sampling))

Every caller that turns a user spec into a user side comes here: `mimesis envs rollout`'s resolvers,
the agent trainers' users, the generalisation panel. So the rules a spec obeys are the same wherever
it is written: the persona is checked against `PERSONAS` (an unknown one is a ValueError naming the
known ones), a simulator folder's manifest and turn format are checked (`artifact.simulator_manifest`),
and a learned simulator decodes with its folder's own settings.

Specs: `scripted:PRESET` (needs the domain) | `prompted:PERSONA[@MODEL]` (MODEL: a folder or MLflow URI
whose base plays the user, or `openai:URL#MODEL`) | `learned:FOLDER` or `learned:models:/…` |
`openai:URL#MODEL` (a served MIMESIS simulator).

A backend says where model users run:
- `PoolBackend`: a command's shared `ModelPool` (rollouts, evaluation): every party over one base loads
  that base once, a learned simulator is one more adapter on it;
- `PolicyBackend`: the policy's own model in agent training, whose base already sits in memory under
  the policy (a PeftModel): a learned simulator is a frozen adapter `user` on it, the prompted user is
  the base with the adapters switched off.
`openai:` users (and `prompted:…@openai:…`) run on their server whichever backend is given; the
backend's `remote` options say how to reach it.

`load_simulator` names a simulator as the fidelity evaluation does (`assistant` | `sft-only` | a
folder | an MLflow URI).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mimesis_rl.envs.protocols import UserSide
from mimesis_rl.models.artifact import DEFAULT_SAMPLING
from mimesis_rl.models.decoding import SamplingParams
from mimesis_rl.simulator.artifact import simulator_manifest
from mimesis_rl.simulator.runtime import UserSimulator

log = logging.getLogger(__name__)

USER_ADAPTER = "user"  # the learned user's adapter name on the policy's PeftModel


@dataclass(frozen=True)
class UserDecoding:
    """How a model user decodes.

    sampling: for users with no decoding of their own (prompted and `openai:` users); the project's
    user default (`models.artifact.DEFAULT_SAMPLING`) unless a caller's settings say otherwise.
    max_new_tokens: a cap on a learned simulator's own token budget (its folder's decoding is used
    otherwise as it is); None = no cap.
    seed: mixed into every sampling seed. max_context_tokens: the dialogue window (None: the model's).
    """

    sampling: SamplingParams = DEFAULT_SAMPLING
    max_new_tokens: int | None = None
    seed: int = 0
    max_context_tokens: int | None = 512

    def capped(self, own: SamplingParams) -> SamplingParams:
        """A learned simulator's own decoding under this cap."""
        if self.max_new_tokens is None:
            return own
        return replace(own, max_new_tokens=min(own.max_new_tokens, self.max_new_tokens))


@dataclass(frozen=True)
class PoolBackend:
    """Model users on a shared `ModelPool`. base: the base model of prompted users and of adapters that
    do not name theirs. remote: `RemoteOptions` for `openai:` users (None: the project's)."""

    pool: Any
    base: Path
    remote: Any = None


@dataclass(frozen=True)
class PolicyBackend:
    """Model users on the policy's own model (agent training). model: the policy (a PeftModel for a
    learned user); base: the policy's base model folder. learned_leave: whether a learned user keeps its
    folder's leave model; agent training has played learned users without it (their own end marker only),
    unlike rollouts and evaluation, and this keeps that until it is decided otherwise."""

    model: Any
    tokenizer: Any
    base: Path
    remote: Any = None
    learned_leave: bool = False


Backend = PoolBackend | PolicyBackend


def known_persona(spec: str, persona: str) -> str:
    """The persona text of `persona`; a ValueError naming the known ones otherwise."""
    from mimesis_rl.envs.personas import PERSONAS

    if persona not in PERSONAS:
        raise ValueError(f"user spec {spec!r}: unknown persona {persona!r}; known: {', '.join(PERSONAS)}")
    return PERSONAS[persona]


def build_user(spec: str, backend: Backend, decoding: UserDecoding | None = None, *,
               domain: str | None = None, name: str | None = None) -> UserSide:
    """The user side `spec` names (see the module docstring). A model user serves every domain; a
    scripted user is built for `domain`. name: the user's name in transcripts (default: the spec)."""
    from mimesis_rl.envs.specs import split_user_spec

    decoding = decoding or UserDecoding()
    kind, body = split_user_spec(spec)
    name = name or spec
    if kind == "scripted":
        from mimesis_rl.envs.registry import scripted_user

        if domain is None:
            raise ValueError(f"user spec {spec!r}: a scripted user is built for one domain; none given")
        return scripted_user(domain, body, name=name)
    if kind == "openai":
        return _remote(spec, backend, decoding, name)
    if kind == "prompted":
        persona, _, model = body.partition("@")
        extra = {"persona": {"persona": known_persona(spec, persona)}}
        if model and _is_remote(model):
            return _remote(model, backend, decoding, name, card_style="prompted", **extra)
        if isinstance(backend, PolicyBackend):
            if model:
                raise ValueError(f"user spec {spec!r}: in agent training a prompted user is the policy's own "
                                 "base with its adapters off; @MODEL is not supported there")
            return _policy_prompted(backend, decoding, name, **extra)
        return _pool_prompted(model, backend, decoding, name, **extra)
    if isinstance(backend, PolicyBackend):
        return _policy_learned(spec, body, backend, decoding, name)
    return UserSimulator.load(body, name=name, base_model=backend.base, pool=backend.pool, seed=decoding.seed,
                              max_new_tokens=decoding.max_new_tokens,
                              max_context_tokens=decoding.max_context_tokens)


def _is_remote(model: str) -> bool:
    from mimesis_rl.models.inference.remote import is_remote_spec

    return is_remote_spec(model)


def _remote(spec: str, backend: Backend, decoding: UserDecoding, name: str, **kwargs: Any) -> UserSimulator:
    return UserSimulator.remote(spec, name=name, sampling=decoding.sampling, seed=decoding.seed,
                                options=backend.remote, max_context_tokens=decoding.max_context_tokens,
                                **kwargs)


def _pool_prompted(model: str, backend: PoolBackend, decoding: UserDecoding, name: str,
                   **kwargs: Any) -> UserSimulator:
    """The base model of `model` (default: the backend's base), told to play the persona."""
    from mimesis_rl.models.inference.sources import resolve_source

    base = Path(resolve_source(model, backend.base).base) if model else backend.base
    return UserSimulator.assistant(base, name=name, sampling=decoding.sampling, pool=backend.pool,
                                   seed=decoding.seed, max_context_tokens=decoding.max_context_tokens,
                                   **kwargs)


def _policy_prompted(backend: PolicyBackend, decoding: UserDecoding, name: str,
                     **kwargs: Any) -> UserSimulator:
    """The policy's base with its adapters off, told to play the persona."""
    from mimesis_rl.models.inference.runner import ModelRunner

    runner = ModelRunner(backend.model, backend.tokenizer, decoding.sampling, adapter=None,
                         seed=decoding.seed)
    return UserSimulator(runner, name=name, card_style="prompted",
                         max_context_tokens=decoding.max_context_tokens, **kwargs)


def _policy_learned(spec: str, body: str, backend: PolicyBackend, decoding: UserDecoding,
                    name: str) -> UserSimulator:
    """A trained simulator as a frozen adapter `user` on the policy's base (its own decoding settings); a
    fully fine-tuned one has no adapter to share and runs as a model of its own."""
    from peft import PeftModel

    from mimesis_rl.models.inference.runner import ModelRunner
    from mimesis_rl.models.inference.sources import resolve_source
    from mimesis_rl.simulator.leaving import FILE as LEAVE_FILE
    from mimesis_rl.simulator.leaving import LeaveModel

    source = resolve_source(body, backend.base)
    manifest = simulator_manifest(f"user spec {spec!r}: {body}", source.manifest)
    if manifest.kind == "full":  # its own weights: loaded beside the policy (one more 135M model)
        return UserSimulator.load(body, name=name, base_model=backend.base, seed=decoding.seed,
                                  sampling=decoding.capped(manifest.sampling),
                                  max_context_tokens=decoding.max_context_tokens,
                                  **({} if backend.learned_leave else {"leave_model": None}))
    if manifest.kind != "lora" or source.adapter is None:
        raise ValueError(
            f"user spec {spec!r}: a {manifest.kind} simulator cannot share the agent's base; "
            "agent training needs a LoRA or fully fine-tuned simulator"
        )
    model = backend.model
    if not isinstance(model, PeftModel):
        raise ValueError("a learned user needs the policy to be a PeftModel (LoRA agent)")
    if Path(source.base).resolve() != Path(backend.base).resolve():
        log.warning("%s was trained on base %s; the agent's base is %s", spec, source.base, backend.base)
    if USER_ADAPTER not in model.peft_config:
        model.load_adapter(str(source.adapter), adapter_name=USER_ADAPTER, is_trainable=False)
    runner = ModelRunner(model, backend.tokenizer, decoding.capped(manifest.sampling), adapter=USER_ADAPTER,
                         seed=decoding.seed)
    leave = None
    if backend.learned_leave and source.folder is not None and (source.folder / LEAVE_FILE).exists():
        leave = LeaveModel.load(source.folder / LEAVE_FILE)
    return UserSimulator.from_manifest(runner, manifest, name=name, leave_model=leave,
                                       max_context_tokens=decoding.max_context_tokens)


def load_simulator(spec: str, base_model: str | Path = "models/base", sft_dir: str | Path | None = None,
                   **kwargs: Any) -> UserSimulator:
    """`assistant` | `sft-only` (needs `sft_dir`) | a folder | an MLflow URI."""
    if spec == "sft-only":
        if sft_dir is None:
            raise ValueError("the `sft-only` baseline needs the SFT simulator folder (sim_sft.output_dir)")
        return UserSimulator.load(sft_dir, name="sft-only", base_model=base_model, **kwargs)
    return UserSimulator.load(spec, base_model=base_model, **kwargs)
