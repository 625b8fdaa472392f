"""`mimesis label`: fill `patterns` on the user turns of any schema-valid JSONL; `mimesis label eval` scores.

    mimesis label --input convs.jsonl --output labeled.jsonl [--backend rules|embedding|llm|ensemble]
    mimesis label eval [--labeler rules --labeler ensemble] [--json]

The group has both a default action and sub-commands, so its callback runs with
`invoke_without_command=True` and does the labelling only when no sub-command was named.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    help="Label user turns with the 13 behaviour patterns, and score the labelers.",
    invoke_without_command=True,
    no_args_is_help=False,
)

ParamsOption = Annotated[
    Path | None, typer.Option("--params", help="params.yaml (default: the project's, else built-in defaults)")
]


def _config(params_path: Path | None, backend: str | None = None) -> Any:
    """LabelSettings from params.yaml (relative paths resolved against its folder), else the defaults."""
    from mimesis_rl.behavior.labelers import LabelSettings
    from mimesis_rl.config import PARAMS_FILE, load_params, project_root

    path = params_path or project_root() / PARAMS_FILE
    if params_path is not None and params_path.exists():
        from mimesis_rl.cli._checks import io_errors
        from mimesis_rl.fsutil import check_input_file

        with io_errors("mimesis label"):
            check_input_file(params_path, "--params")
    if path.exists():
        from mimesis_rl.params.check import ParamsError

        try:
            params = load_params(path)
        except ParamsError as exc:  # one line per problem, exit 2: never a traceback
            typer.secho(f"error: {exc}", fg="red", err=True)
            raise typer.Exit(2) from None
        config = LabelSettings.from_params(params)
        root = path.resolve().parent
        config = dataclasses.replace(config, model_dir=str(root / config.model_dir))
    elif params_path is not None:
        raise typer.BadParameter(f"{params_path}: params file not found", param_hint="--params")
    else:
        config = LabelSettings()
    return dataclasses.replace(config, backend=backend) if backend else config


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.secho(message, fg="red", err=True)
    return typer.Exit(code)


@app.callback(invoke_without_command=True)
def label(
    ctx: typer.Context,
    input: Annotated[Path | None, typer.Option("--input", "-i", help="conversations JSONL to label")] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="where to write the labelled JSONL")
    ] = None,
    backend: Annotated[str, typer.Option(help="rules | embedding | llm | ensemble")] = "ensemble",
    quarantine: Annotated[
        Path | None, typer.Option(help="write bad records here instead of failing on the first one")
    ] = None,
    max_bad_share: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="with --quarantine: fail above this share (0-1)")
    ] = 0.05,
    probabilities: Annotated[
        bool, typer.Option(help="also store each turn's pattern probabilities in meta.pattern_probs")
    ] = False,
    params: ParamsOption = None,
) -> None:
    """Label every user turn of INPUT; every other field of every record is kept as it was."""
    if ctx.invoked_subcommand is not None:
        return
    if input is None or output is None:
        typer.echo(ctx.get_help())
        raise _fail("\nmimesis label: give --input and --output (or a sub-command such as `eval`)", 2)
    # Paths first: a wrong one fails in a second, before the labelers (and torch) are imported.
    from mimesis_rl.cli._checks import io_errors
    from mimesis_rl.fsutil import check_distinct, check_input_file, check_output_file, os_error_line

    with io_errors("mimesis label"):
        check_input_file(input, "--input")
        check_output_file(output, "--output")
        if quarantine:
            check_output_file(quarantine, "--quarantine")
        check_distinct({"--input": input, "--output": output, "--quarantine": quarantine})

    from mimesis_rl.behavior.labelers import BACKENDS, build_labeler
    from mimesis_rl.behavior.labeling import label_file
    from mimesis_rl.behavior.openai_client import EndpointError
    from mimesis_rl.data.jsonl import DataError, write_jsonl

    if backend not in BACKENDS:
        raise typer.BadParameter(
            f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}", param_hint="--backend"
        )
    bad: list[dict[str, Any]] | None = [] if quarantine else None
    labeler = None
    done = False
    try:
        labeler = build_labeler(backend, _config(params, backend))
        stats = label_file(
            input,
            output,
            labeler,
            quarantine=bad,
            max_bad_share=max_bad_share,
            with_probabilities=probabilities,
        )
        done = True
    except (DataError, EndpointError, ValueError, FileNotFoundError) as exc:
        raise _fail(f"mimesis label: {exc}") from None
    except OSError as exc:
        raise _fail(f"mimesis label: {os_error_line(exc)}", 2) from None
    finally:
        if quarantine and (bad or done):  # always beside a finished output, so no stale one stays
            write_jsonl(quarantine, bad or [])
        if labeler is not None:
            labeler.close()
    typer.echo(
        f"labelled {stats.user_turns} user turns in {stats.conversations} conversations with `{backend}` "
        f"-> {output}" + (f"; {stats.quarantined} quarantined -> {quarantine}" if stats.quarantined else "")
    )
    top = ", ".join(f"{name} {count}" for name, count in stats.patterns.most_common(5))
    typer.echo(f"most frequent: {top or 'none'}; turns without any pattern: {stats.no_pattern}")


@app.command("eval")
def eval_(
    labelers: Annotated[
        list[str] | None,
        typer.Option("--labeler", help="labelers to score (repeatable; default: label.evaluate)"),
    ] = None,
    gold: Annotated[Path | None, typer.Option(help="gold JSONL (default: the packaged set)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of the tables")] = False,
    cross: Annotated[
        bool,
        typer.Option(
            "--cross-source/--no-cross-source",
            help="also refit without each real gold source and score on it (trained labelers: minutes)",
        ),
    ] = True,
    params: ParamsOption = None,
) -> None:
    """Cross-source macro-F1 (each real gold source held out in turn), F1 on CaSiNo's own strategy
    annotations, and per-pattern F1 on the gold test split with the gold set's kappa."""
    if gold is not None:  # a folder or unreadable file: one line, exit 2, before anything is imported
        from mimesis_rl.cli._checks import io_errors
        from mimesis_rl.fsutil import check_input_file

        with io_errors("mimesis label eval"):
            check_input_file(gold, "--gold")
    from mimesis_rl.behavior.labelers import BACKENDS, build_labelers
    from mimesis_rl.behavior.openai_client import EndpointError
    from mimesis_rl.behavior.report import evaluate_labelers
    from mimesis_rl.data.jsonl import DataError

    config = _config(params)
    if gold is not None:
        config = dataclasses.replace(config, gold=str(gold))
    names = labelers or list(config.evaluate)
    unknown = sorted(set(names) - set(BACKENDS))
    if unknown:
        raise typer.BadParameter(
            f"unknown labelers {unknown}; known: {', '.join(BACKENDS)}", param_hint="--labeler"
        )
    built: dict[str, Any] = {}
    try:
        built = build_labelers(names, config)
        result = evaluate_labelers(config, built, cross=cross)
    except (DataError, EndpointError, ValueError, FileNotFoundError) as exc:
        raise _fail(f"mimesis label eval: {exc}") from None
    finally:
        for labeler in built.values():
            labeler.close()
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    typer.echo(result.markdown())
