"""Spec strings for the two parties, resolved to `UserSide` / `AgentSide` objects.

User specs:  `scripted:<preset>` (built in), `prompted:<persona>[@<model>]`, `learned:<path or models:/uri>`,
             `openai:http://HOST:PORT/v1#MODEL` (a simulator served by any OpenAI-compatible engine).
Agent specs: `scripted` or `scripted:<policy>` (built in), `model:<path>`, `models:/<name>@<alias>`, or a
             path to a model folder.

Only scripted parties are built here: this package must not depend on models. Layers above
(`mimesis_rl.rollout`, `mimesis_rl.simulator`) add the model-backed kinds by registering a
resolver; until one is registered, such a spec fails with `UnsupportedSpec` and says what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from mimesis_rl.envs.protocols import AgentSide, UserSide

UserResolver = Callable[[str, str], UserSide]  # (spec body, domain) -> user side
AgentResolver = Callable[[str, str], AgentSide]  # (spec body, domain) -> agent side

USER_KINDS = ("scripted", "prompted", "learned", "openai")
AGENT_KINDS = ("scripted", "model")

_USER_RESOLVERS: dict[str, UserResolver] = {}
_AGENT_RESOLVERS: dict[str, AgentResolver] = {}


class UnsupportedSpec(ValueError):
    """A spec that is well-formed but cannot be built here (no resolver for its kind yet)."""


def register_user_resolver(kind: str, resolver: UserResolver) -> None:
    """Teach `make_user` a model-backed kind (`prompted`, `learned` or `openai`)."""
    if kind not in USER_KINDS or kind == "scripted":
        raise ValueError(f"user resolver kind must be 'prompted' or 'learned' (or 'openai'), got {kind!r}")
    _USER_RESOLVERS[kind] = resolver


def register_agent_resolver(kind: str, resolver: AgentResolver) -> None:
    """Teach `make_agent` the `model` kind (model folders, `model:` paths and `models:/` URIs)."""
    if kind != "model":
        raise ValueError(f"agent resolver kind must be 'model', got {kind!r}")
    _AGENT_RESOLVERS[kind] = resolver


def can_build_user(kind: str) -> bool:
    """Whether `make_user` can build specs of this kind right now."""
    return kind == "scripted" or kind in _USER_RESOLVERS


def split_user_spec(spec: str) -> tuple[str, str]:
    """`kind:body` of a user spec, with a clear error for anything else."""
    kind, sep, body = spec.partition(":")
    if not sep or kind not in USER_KINDS or not body:
        raise ValueError(
            f"bad user spec {spec!r}: expected one of {', '.join(k + ':NAME' for k in USER_KINDS)}"
        )
    return kind, body


def split_agent_spec(spec: str) -> tuple[str, str]:
    """`(kind, body)` of an agent spec; `models:/…` URIs and existing folders are of kind `model`."""
    if spec == "scripted":
        return "scripted", "scripted"
    if spec.startswith("scripted:"):
        return "scripted", spec.split(":", 1)[1]
    if spec.startswith("model:"):
        return "model", spec.split(":", 1)[1]
    if spec.startswith("models:/") or spec.startswith("runs:/") or Path(spec).is_dir():
        return "model", spec
    raise ValueError(
        f"bad agent spec {spec!r}: expected 'scripted', 'scripted:POLICY', 'model:PATH', "
        f"'models:/NAME@ALIAS' or an existing model folder"
    )


def make_user(spec: str, domain: str) -> UserSide:
    """The user side a spec names, for one domain."""
    kind, body = split_user_spec(spec)
    if kind == "scripted":
        from mimesis_rl.envs.registry import scripted_user

        return scripted_user(domain, body, name=spec)
    resolver = _USER_RESOLVERS.get(kind)
    if resolver is None:
        raise UnsupportedSpec(
            f"user spec {spec!r} needs a {kind!r} resolver, and none is registered; "
            f"load the layer that provides it (mimesis_rl.simulator / mimesis_rl.rollout) "
            f"or use a scripted user (scripted:PRESET)"
        )
    return resolver(body, domain)


def make_agent(spec: str, domain: str) -> AgentSide:
    """The agent side a spec names, for one domain."""
    kind, body = split_agent_spec(spec)
    if kind == "scripted":
        from mimesis_rl.envs.registry import scripted_agent

        return scripted_agent(domain, body)
    resolver = _AGENT_RESOLVERS.get(kind)
    if resolver is None:
        raise UnsupportedSpec(
            f"agent spec {spec!r} needs a model resolver, and none is registered; "
            f"the rollout engine (mimesis_rl.rollout) provides it, or use a scripted agent "
            f"(scripted, scripted:never_act, …)"
        )
    return resolver(body, domain)
