"""`mimesis envs …`: list the task domains and the panel; play dialogues and write transcripts."""

from __future__ import annotations

import functools
import importlib
import json
import logging
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from mimesis_rl.rollout.resolvers import ModelParties

app = typer.Typer(
    help="Task environments, scripted users and agents, the simulator panel.", no_args_is_help=True
)

# Modules with a `register(parties)` that teaches `envs.specs` model-backed specs, when they exist.
RESOLVER_MODULES = ("mimesis_rl.rollout.resolvers", "mimesis_rl.simulator.resolvers")
log = logging.getLogger(__name__)


def project_parties() -> ModelParties:
    """The model parties of the checkout around the working directory: params.yaml `rollout` (decoding,
    seed, default base, remote users) and `models:` (the pool's device and dtype); the defaults outside
    a checkout (a malformed params.yaml is an error)."""
    from pathlib import Path

    from mimesis_rl.config import load_params, project_root
    from mimesis_rl.models.config import PrecisionSettings
    from mimesis_rl.models.inference.pool import ModelPool
    from mimesis_rl.rollout.resolvers import ModelParties
    from mimesis_rl.rollout.settings import RolloutSettings

    try:
        params = load_params()
    except FileNotFoundError:
        params = {}
    settings = RolloutSettings.from_section(params.get("rollout"))
    base = Path(settings.default_base)
    base = base if base.is_absolute() else project_root() / base
    return ModelParties(settings, ModelPool(PrecisionSettings.from_params(params)), base)


def load_resolvers() -> list[str]:
    """Register the layers that teach `envs.specs` model-backed specs; returns the ones found. Their
    parties (one pool) are built from params.yaml when a model spec is first resolved, not before."""
    parties = functools.cache(project_parties)
    loaded = []
    for name in RESOLVER_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue  # that layer has no resolvers (yet)
            raise
        module.register(parties)
        loaded.append(name)
    return loaded


@app.command("list")
def list_command() -> None:
    """The built-in domains, one line each."""
    from mimesis_rl.envs.registry import DOMAINS

    for name, dom in DOMAINS.items():
        typer.echo(f"{name:<10} {dom.description} (max {dom.env_cls.max_turns} agent turns)")


@app.command("panel")
def panel_command(
    registry: bool = typer.Option(True, help="look learned members up in the registry if no folder"),
) -> None:
    """The simulator panel: name, role, spec, and whether it is built (files checked, no model loaded)."""
    from mimesis_rl.envs.panel import default_panel
    from mimesis_rl.tracking.chain import registered_version

    load_resolvers()
    panel = default_panel()
    ready = {m.name for m in panel.available()}
    states = panel.status(registry=registered_version if registry else None)
    for m, st in zip(panel.members, states, strict=True):
        mark = st.state if m.name in ready else "needs resolver"
        typer.echo(f"{m.role:<9} {m.name:<30} {m.spec:<55} {mark:<9} {st.detail}")
    unseen = [st for m, st in zip(panel.members, states, strict=True) if m.role == "unseen"]
    typer.echo(f"unseen: {sum(st.built for st in unseen)} of {len(unseen)} built")


@app.command("rollout")
def rollout_command(
    env: str = typer.Option(..., "--env", help="domain name (see `mimesis envs list`)"),
    agent: str = typer.Option("scripted", help="scripted | scripted:POLICY | model folder | models:/…"),
    user: str = typer.Option("scripted:cooperative",
                             help="scripted:PRESET | prompted:PERSONA[@MODEL] | learned:… | "
                                  "openai:http://HOST:PORT/v1#MODEL (key: $MIMESIS_OPENAI_API_KEY)"),
    n: int = typer.Option(8, "-n", help="number of dialogues"),
    out: str = typer.Option(..., "--out", help="transcripts JSONL to write"),
    seed: int = typer.Option(0, help="first seed; dialogues use seed, seed+1, …"),
    max_turns: int = typer.Option(None, help="override the domain's turn limit"),
) -> None:
    """Play N dialogues, write the transcripts and print a success/reward summary."""
    from mimesis_rl.data.jsonl import write_jsonl
    from mimesis_rl.envs.loop import play, summarize
    from mimesis_rl.envs.registry import make_env
    from mimesis_rl.envs.specs import UnsupportedSpec, make_agent, make_user

    if n < 1:
        typer.secho("-n must be at least 1", fg="red", err=True)
        raise typer.Exit(2)
    from mimesis_rl.cli._checks import io_errors
    from mimesis_rl.cli._store import sweep_if_store
    from mimesis_rl.fsutil import check_output_file

    with io_errors():
        check_output_file(out, "--out")  # before any dialogue is played
    try:
        environment = make_env(env, max_turns=max_turns)
        load_resolvers()
        sweep_if_store(agent, user)
        agent_side = make_agent(agent, env)
        user_side = make_user(user, env)
    except UnsupportedSpec as exc:
        typer.secho(f"not supported yet: {exc}", fg="yellow", err=True)
        raise typer.Exit(3) from None
    except (KeyError, ValueError, FileNotFoundError) as exc:  # unknown name, bad spec, missing model folder
        typer.secho(str(exc).strip("'\""), fg="red", err=True)
        raise typer.Exit(2) from None
    states = play(environment, agent_side, user_side, list(range(seed, seed + n)))
    with io_errors():
        written = write_jsonl(out, (s.to_record(agent=agent, user=user) for s in states))
    summary = {
        "env": env,
        "agent": agent,
        "user": user,
        "seed": seed,
        **summarize(states),
        "out": out,
        "written": written,
    }
    typer.echo(json.dumps(summary, indent=2))
