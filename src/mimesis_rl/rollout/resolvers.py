"""Model-backed party specs for `mimesis envs rollout` (registered with `mimesis_rl.envs.specs`).

    --agent models:/mimesis-agent@champion | model:PATH | PATH      -> ModelAgent
    --user  learned:models:/mimesis-simulator@champion | learned:PATH -> UserSimulator (trained format)
    --user  prompted:PERSONA[@MODEL]                                  -> UserSimulator over a base model:
                                                                        a plain role-play card + the persona

Every model user is a `UserSimulator`, the same runtime the fidelity evaluation measures. All
parties of one process share one `ModelPool`, so an agent adapter and a simulator adapter over the
same base load that base once. Importing this module registers the resolvers.
"""

from __future__ import annotations

from pathlib import Path

from mimesis_rl.envs.specs import register_agent_resolver, register_user_resolver
from mimesis_rl.models.config import PrecisionConfig
from mimesis_rl.models.inference.pool import ModelPool
from mimesis_rl.models.inference.sources import resolve_source
from mimesis_rl.rollout.agent import ModelAgent
from mimesis_rl.rollout.settings import RolloutSettings
from mimesis_rl.simulator.api import UserSimulator

_POOL: ModelPool | None = None


def _params() -> dict:
    from mimesis_rl.config import load_params

    try:
        return load_params()
    except FileNotFoundError:  # outside a checkout: the defaults (a malformed params.yaml is an error)
        return {}


def settings() -> RolloutSettings:
    """The `rollout` section of the project's params.yaml (defaults outside a checkout)."""
    return RolloutSettings.from_section(_params().get("rollout"))


def pool() -> ModelPool:
    """The process-wide pool, on the device/dtype of the precision switch (params.yaml `models:`)."""
    global _POOL
    if _POOL is None:
        _POOL = ModelPool(PrecisionConfig.from_params(_params()))
    return _POOL


def _default_base(conf: RolloutSettings) -> Path:
    from mimesis_rl.config import project_root

    base = Path(conf.default_base)
    return base if base.is_absolute() else project_root() / base


def resolve_agent(body: str, domain: str) -> ModelAgent:
    """`body`: a model folder or an MLflow URI (the `model:` prefix already stripped)."""
    conf = settings()
    source = resolve_source(body, _default_base(conf))
    runner = pool().runner(source, conf.agent_sampling(), seed=conf.seed)
    return ModelAgent(runner, name=f"model:{body}")


def resolve_learned_user(body: str, domain: str) -> UserSimulator:
    """`body`: a simulator folder or an MLflow URI; it decodes with its own settings."""
    conf = settings()
    return UserSimulator.load(body, name=f"learned:{body}", base_model=_default_base(conf), pool=pool(),
                              seed=conf.seed, max_context_tokens=conf.user_max_context_tokens)


def resolve_prompted_user(body: str, domain: str) -> UserSimulator:
    """`body`: PERSONA or PERSONA@MODEL (a folder or MLflow URI; default: the project's base model)."""
    from mimesis_rl.envs.panel import PERSONAS

    persona, _, model = body.partition("@")
    if persona not in PERSONAS:
        raise ValueError(f"unknown persona {persona!r}; known: {', '.join(PERSONAS)}")
    conf = settings()
    base = Path(resolve_source(model, _default_base(conf)).base) if model else _default_base(conf)
    return UserSimulator.assistant(base, name=f"prompted:{body}", sampling=conf.user_sampling(), pool=pool(),
                                   seed=conf.seed, persona={"persona": PERSONAS[persona]},
                                   max_context_tokens=conf.user_max_context_tokens)


register_agent_resolver("model", resolve_agent)
register_user_resolver("learned", resolve_learned_user)
register_user_resolver("prompted", resolve_prompted_user)
