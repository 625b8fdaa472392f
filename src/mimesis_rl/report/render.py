"""Assembling the sections and rendering both files (HTML embeds the images, Markdown links them)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from mimesis_rl.fsutil import read_json
from mimesis_rl.report.cells import fmt, verdict_class
from mimesis_rl.report.curves import curves_section
from mimesis_rl.report.dialogues import dialogue_section
from mimesis_rl.report.sections import (
    NOT_PRODUCED,
    SECTIONS,
    Section,
    claims_section,
    fidelity_section,
    generalisation_section,
    pattern_section,
    promotion_section,
    validation_section,
)
from mimesis_rl.report.settings import ReportSettings


def build(settings: ReportSettings, run_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every section's data (the context both templates render)."""
    report_dir = settings.html_path.parent
    assets = report_dir / f"{settings.html_path.stem}_files"
    # Always there (a DVC output), even when no chart is drawn: a note says what it is for.
    assets.mkdir(parents=True, exist_ok=True)
    (assets / "README.txt").write_text(
        f"Images {settings.md_path.name} links to ({settings.html_path.name} embeds them or links here).\n"
    )
    fidelity = read_json(Path(settings.sim_eval) / "fidelity.json")
    generalisation = read_json(Path(settings.agent_eval) / "generalisation.json")
    sections = {
        "validation": validation_section(settings),
        "patterns": pattern_section(settings, fidelity, assets, report_dir),
        "fidelity": fidelity_section(settings, fidelity, report_dir),
        "dialogues": dialogue_section(settings),
        "generalisation": generalisation_section(settings, generalisation, report_dir),
        "claims": claims_section(settings),
        "promotion": promotion_section(settings),
    }
    order = list(SECTIONS)
    curves = curves_section(settings, assets, report_dir)
    if curves is not None:  # a section only where a training stage recorded curve points
        sections["curves"] = curves
        order.insert(order.index("generalisation") + 1, "curves")
    return {
        "title": settings.title,
        "run": dict(run_info or {}),
        "sections": sections,
        "order": order,
        "not_produced": NOT_PRODUCED,
    }


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("mimesis_rl.report", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html", "html.jinja"), default_for_string=False),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["fmt"] = fmt
    env.filters["codeticks"] = lambda text: Markup(
        re.sub(r"`([^`]+)`", r"<code>\1</code>", str(escape(text)))
    )
    env.filters["mdcell"] = lambda v: str(v if v is not None else "–").replace("|", "\\|").replace("\n", " ")
    env.globals["verdict_class"] = verdict_class
    return env


def render_html(context: Mapping[str, Any]) -> str:
    return _environment().get_template("report.html.jinja").render(**context)


def render_markdown(context: Mapping[str, Any]) -> str:
    return _environment().get_template("report.md.jinja").render(**context)


def write(settings: ReportSettings, run_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Render both files atomically; returns the paths and a summary for metrics/report.json."""
    from mimesis_rl.fsutil import write_text

    context = build(settings, run_info)
    md_context = dict(context)
    write_text(settings.html_path, render_html(context))
    # The Markdown links images (relative) instead of embedding them.
    write_text(settings.md_path, render_markdown(md_context))
    sections: dict[str, Section] = context["sections"]
    claims = sections["claims"].data.get("rows", []) if sections["claims"].produced else []
    return {
        "html": str(settings.html_path),
        "md": str(settings.md_path),
        "html_bytes": settings.html_path.stat().st_size,
        "sections_produced": sum(s.produced for s in sections.values()),
        "sections_missing": [k for k, s in sections.items() if not s.produced],
        "sections": {k: int(s.produced) for k, s in sections.items()},
        "dialogues": len(sections["dialogues"].data.get("dialogues", [])),
        "claims": {f"claim{r['id']}": r["verdict"] for r in claims},
        "context": context,
    }
