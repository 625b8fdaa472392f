"""The report stage: every section rendered from written inputs, missing inputs said plainly, the page
read back in headless Chromium, and both files logged to the pipeline's parent MLflow run."""

from __future__ import annotations

import json
import random
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from mimesis_rl.data.schema import PATTERN_NAMES
from mimesis_rl.eval.claims import claims_table
from mimesis_rl.eval.coach_notes import with_coach_notes
from mimesis_rl.eval.generalisation_metrics import analyse
from mimesis_rl.eval.generalisation_settings import GeneralisationSettings
from mimesis_rl.report.render import write
from mimesis_rl.report.sections import NOT_PRODUCED, SECTIONS
from mimesis_rl.report.settings import ReportSettings

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")


def tiny_png(path: Path, rgb: tuple[int, int, int] = (40, 120, 200), size: int = 6) -> Path:
    """A valid RGB PNG, written by hand (zlib + CRCs), so the test needs no plotting library."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    raw = b"".join(b"\x00" + bytes(rgb) * size for _ in range(size))
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return path


def _fidelity_row(seed: int, td: float, bf: float) -> dict[str, Any]:
    rng = random.Random(seed)
    real = {p: round(rng.random() * 0.3, 3) for p in PATTERN_NAMES}
    sim = {p: round(max(0.0, v + rng.uniform(-0.1, 0.1)), 3) for p, v in real.items()}
    return {
        "turns": 40,
        "conversations": 12,
        "fidelity_index": 50.0 + seed,
        "behaviour_fidelity": bf,
        "behaviour_fidelity_ci": [bf - 0.05, bf + 0.05],
        "pattern_macro_f1": 0.3,
        "turing_distance": td,
        "turing_distance_ci": [td - 6.0, td + 6.0],
        "cluster_jsd": 0.2,
        "first_turn_distinct2_sim": 0.8,
        "goal_adherence": 0.9,
        "termination_f1": 0.4,
        "sim_leave_rate": 0.1,
        "real_leave_rate": 0.15,
        "role_adherence_rate": 0.95,
        "refusal_rate": 0.01,
        "perplexity": 30.0,
        "sim_mean_words": 11.0,
        "clean_share": 0.9,
        "repaired_share": 0.05,
        "rejected_sample_share": 0.05,
        "rejected_after_resample_share": 0.0,
        "role_break_share": 0.02,
        "opening_turns": 12,
        "opening_turing_distance": td + 3,
        "opening_turing_distance_ci": [td - 5, td + 11],
        "opening_cue_echoes": 1,
        "opening_cue_echo_examples": ["so the chat opened, hi"],
        "opening_rejected": 0,
        "opening_sim_mean_words": 9.0,
        "opening_real_mean_words": 8.0,
        "opening_sim_leave_rate": 0.0,
        "components": {"behaviour": bf},
        "pattern_rates": {"real": real, "simulated": sim},
    }


def _transcript(agent: str, member: str, seed: int, success: bool) -> dict[str, Any]:
    goal = {
        "text": "You want to buy the leather couch listed at $490. You will pay at most $381 and would "
        "rather not reveal that.",
        "slots": {"item": "leather couch", "list_price": 490, "reservation": 381},
        "private": ["reservation"],
    }
    turns = [
        {
            "role": "user",
            "content": "hi, is the couch still available?",
            "reasoning": f"I must not say my limit of $381 yet ({member} {seed}).",
            "patterns": [],
            "meta": {},
        },
        {
            "role": "assistant",
            "content": "Yes! It is $490.",
            "reasoning": None,
            "patterns": [],
            "meta": {"action": {"type": "offer", "price": 490}},
        },
        {
            "role": "user",
            "content": "that's way too much for me",
            "reasoning": "Too high. I would rather not say how much I can pay.",
            "patterns": ["pushback", "withholding_info"],
            "meta": {},
        },
        {
            "role": "assistant",
            "content": "What would work for you?",
            "reasoning": None,
            "patterns": [],
            "meta": {},
        },
        {
            "role": "user",
            "content": "ok, fine" if success else "never mind, bye",
            "reasoning": "Close enough." if success else "This is going nowhere.",
            "patterns": [],
            "meta": {},
        },
    ]
    return {
        "episode_id": f"bargain-{seed}",
        "domain": "bargain",
        "seed": seed,
        "env": "multi",
        "agent": agent,
        "user": member,
        "member": member,
        "warnings": [],
        "goal": goal,
        "persona": None,
        "system_prompt": "",
        "turns": turns,
        "agent_turns": 2,
        "max_turns": 4,
        "invalid_actions": 0,
        "penalty": 0.0,
        "actions": [],
        "final_action": None,
        "accepted": success,
        "end_reason": "accepted" if success else "user_left",
        "verdict": None,
        "reward": 1.0 if success else 0.0,
        "success": success,
    }


AGENTS = ["rl-assistant", "rl-mimesis", "rl-mimesis-csd"]
MEMBERS = ["scripted-terse", "prompted-busy-parent", "mimesis-simulator-seed1"]
ENVS = ["bargain", "tutoring"]


def write_inputs(root: Path) -> ReportSettings:
    """One run's worth of stage outputs, small: the report's whole input contract."""
    reports = root / "reports"
    (reports / "validation").mkdir(parents=True)
    (reports / "validation" / "summary.json").write_text(
        json.dumps(
            {
                "records": 240,
                "valid": 236,
                "quarantined": 4,
                "bad_share": 4 / 240,
                "blank_lines": 0,
                "reasons": {"turn_count": 3, "schema": 1},
                "pii": {"conversations": 2, "turns": 3, "pii_phone": 2, "pii_email": 1},
                "gx": {"expectations": 11, "failed_expectations": 2, "success": False},
                "bad_records": ["data/raw/conversations.jsonl:17: turn_count: 1 turn, needs 2"],
                "pii_turns": [],
            }
        )
    )
    (reports / "label").mkdir()
    (reports / "label" / "distribution.json").write_text(
        json.dumps({"share": {p: 0.05 for p in PATTERN_NAMES}, "no_pattern_share": 0.4})
    )
    sim = reports / "sim_eval"
    sim.mkdir()
    results = {"assistant": _fidelity_row(1, 80.0, 0.55), "sft+rl": _fidelity_row(2, 40.0, 0.8)}
    env = {
        "settings": {"seeds": [0], "agent": "scripted"},
        "rows": {},
        "overall": {
            name: {"success_rate": 0.5, "mean_reward": 0.4, "contradiction_rate": 0.01, "user_turns": 16}
            for name in ("reference", "assistant", "sft+rl")
        },
    }
    (sim / "fidelity.json").write_text(
        json.dumps(
            {
                "data": "data/processed/splits/test.jsonl",
                "bad_records": 0,
                "results": results,
                "environment": env,
            }
        )
    )
    tiny_png(sim / "fidelity.png")
    tiny_png(sim / "environment.png", (200, 80, 40))
    agent_eval = reports / "agent_eval"
    settings = GeneralisationSettings.from_section(
        {
            "agents": [{"name": a, "spec": "scripted", "trained_on": a.split("-", 1)[1]} for a in AGENTS],
            "comparisons": {
                "mimesis_vs_assistant": {"a": "rl-mimesis", "b": "rl-assistant"},
                "csd_vs_rl": {"a": "rl-mimesis-csd", "b": "rl-mimesis"},
            },
            "bootstrap": 200,
            "dialogues_per_cell": 3,
        }
    )
    rng = random.Random(0)
    skill = {"rl-assistant": 0.3, "rl-mimesis": 0.6, "rl-mimesis-csd": 0.7}
    rows = [
        {
            "agent": a,
            "member": m,
            "env": e,
            "seed": s,
            "success": rng.random() < skill[a],
            "reward": 0.0,
            "agent_turns": 3,
            "turns_to_success": 3,
            "clarifying_questions": 1,
            "actions": 1,
            "has_private": True,
            "private_known_at": 1,
            "actions_before_private_known": 0,
            "end_reason": "accepted",
            "invalid_actions": 0,
        }
        for a in AGENTS
        for m in MEMBERS
        for e in ENVS
        for s in range(3)
    ]
    for r in rows:
        r["reward"] = float(r["success"])
    result = {
        "settings": {"dialogues_per_cell": 3, "confidence": 0.95, "bootstrap": 200},
        "agents": AGENTS,
        "trained_on": {a: a.split("-", 1)[1] for a in AGENTS},
        "members": MEMBERS,
        "envs": ENVS,
        "seeds": [0, 1, 2],
        "missing_agents": [
            {"name": "sft-only", "spec": "model:models/agent/sft", "reason": "models/agent/sft not found"}
        ],
        "skipped_members": [],
        **analyse(rows, settings, AGENTS, MEMBERS, ENVS),
        "cost": {"dialogues": len(rows), "seconds": 12.0, "cpu": "test CPU", "load": 1.0},
        "heatmaps": {
            a: str(tiny_png(agent_eval / f"heatmap_{a}.png", (i * 80, 150, 90))) for i, a in enumerate(AGENTS)
        },
    }
    (agent_eval / "generalisation.json").write_text(json.dumps(result))
    table = claims_table(
        json.loads((sim / "fidelity.json").read_text()), result, final="sft+rl", baseline="assistant"
    )
    (agent_eval / "claims.json").write_text(json.dumps(table))
    (agent_eval / "transcripts").mkdir()
    for a in AGENTS:
        # as agent_eval writes them: each dialogue with its coach notes (the report only reads them)
        lines = with_coach_notes([_transcript(a, m, s, s % 2 == 0) for m in MEMBERS for s in range(2)], 2)
        (agent_eval / "transcripts" / f"{a}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (reports / "promote").mkdir()
    (reports / "promote" / "decision.json").write_text(
        json.dumps(
            {
                "simulator": {
                    "registered_model": "mimesis-simulator",
                    "candidate_version": "2",
                    "champion_version": "1",
                    "promoted": True,
                    "reasons": ["ok fidelity_index: 52 vs champion 50"],
                    "candidate": {},
                    "champion": {},
                },
                "agent": "reports/agent_eval/generalisation.json not found: agent not evaluated",
            }
        )
    )
    return _settings(root)


def _settings(root: Path, **extra: Any) -> ReportSettings:
    reports = root / "reports"
    return ReportSettings(
        output=str(reports / "mimesis_report"),
        validation=str(reports / "validation" / "summary.json"),
        label=str(reports / "label" / "distribution.json"),
        sim_eval=str(reports / "sim_eval"),
        agent_eval=str(reports / "agent_eval"),
        promote=str(reports / "promote" / "decision.json"),
        metrics=str(root / "metrics"),
        **extra,
    )


class Page(HTMLParser):
    """Sections by id and the claims table's rows (cell texts), from an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, str] = {}
        self.claims: list[list[str]] = []
        self.images: list[str] = []
        self._in_claims = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section" and a.get("id"):
            self.sections[a["id"] or ""] = a.get("data-produced") or ""
        if tag == "img":
            self.images.append(a.get("src") or "")
        if tag == "table" and a.get("id") == "claims-table":
            self._in_claims = True
        if self._in_claims and tag == "tr":
            self._row = []
        if self._in_claims and self._row is not None and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if self._in_claims and tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        if self._in_claims and tag == "tr" and self._row is not None:
            self.claims.append(self._row)
            self._row = None
        if tag == "table" and self._in_claims:
            self._in_claims = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


def test_every_section_rendered_from_the_stage_outputs(tmp_path: Path) -> None:
    settings = write_inputs(tmp_path)
    summary = write(settings, {"profile": "tiny", "git_commit": "abc1234"})
    html = settings.html_path.read_text()
    md = settings.md_path.read_text()
    page = parse(html)
    assert {k: page.sections.get(k) for k in SECTIONS} == dict.fromkeys(SECTIONS, "yes")
    assert summary["sections_produced"] == len(SECTIONS) and summary["sections_missing"] == []
    assert NOT_PRODUCED not in html.split("<nav>")[1]  # every section has its input
    # 1: validation counts and reasons, PII checks
    assert "turn_count" in html and "phone" in html and "conversations.jsonl:17" in html
    # 2: one row per pattern, real and both simulators
    for p in PATTERN_NAMES:
        assert p.replace("_", " ") in html
    assert "real (held-out)" in html and "corpus (label)" in html
    # 3: intervals in the fidelity table, format / opening / environment rows
    assert "40.0 [34.0, 46.0]" in html
    for table_id in ("fidelity-table", "format-table", "opening-table", "environment-table"):
        assert f'id="{table_id}"' in html
    # 4: reasoning beside user turns, coach notes beside agent turns, private value never in a note
    assert "I must not say my limit" in html and "private reasoning" in html
    notes = [line for line in html.split("coach note</span>")[1:]]
    assert notes and all("381" not in n.split("</div>")[0] for n in notes)
    assert summary["dialogues"] == 3
    # 5: heatmaps embedded, comparisons with k of n, the claims table with computed verdicts
    assert sum(src.startswith("data:image/png;base64,") for src in page.images) >= 3 + 2 + 1
    assert "better on <b>" in html
    claims = json.loads((tmp_path / "reports/agent_eval/claims.json").read_text())
    assert [r[-1] for r in page.claims[1:]] == [r["verdict"] for r in claims["rows"]]
    assert summary["claims"] == {f"claim{r['id']}": r["verdict"] for r in claims["rows"]}
    # the promotion decision line, and a gate that did not run said as such
    assert "mimesis-simulator version 2: promoted to champion" in html
    assert "agent not evaluated" in html
    # static and offline: no script, no remote resource
    assert "<script" not in html and "http://" not in html and "https://" not in html
    # the Markdown has the same parts, images linked relative to the report
    for title in (
        "1. Data validation",
        "2. Behaviour patterns",
        "3. Simulator fidelity",
        "4. Sample dialogues",
        "5. Generalisation",
        "The paper's claims, measured",
        "Promotion gate",
    ):
        assert title in md
    assert "](sim_eval/fidelity.png)" in md and "](agent_eval/heatmap_rl-mimesis.png)" in md
    assert (settings.html_path.parent / "mimesis_report_files" / "patterns.png").stat().st_size > 0


def test_each_missing_input_is_said_plainly(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    summary = write(settings)
    page = parse(settings.html_path.read_text())
    assert {k: page.sections.get(k) for k in SECTIONS} == dict.fromkeys(SECTIONS, "no")
    assert summary["sections_produced"] == 0
    body = settings.html_path.read_text()
    assert body.count(NOT_PRODUCED) >= len(SECTIONS)
    assert settings.md_path.read_text().count(NOT_PRODUCED) >= len(SECTIONS)
    assert (tmp_path / "reports" / "mimesis_report_files" / "README.txt").is_file()  # the DVC output exists


def test_bad_transcript_line_is_named(tmp_path: Path) -> None:
    settings = write_inputs(tmp_path)
    bad = tmp_path / "reports/agent_eval/transcripts/rl-mimesis.jsonl"
    bad.write_text(bad.read_text() + "{not json\n")
    with pytest.raises(ValueError, match=r"rl-mimesis\.jsonl:7: not valid JSON"):
        write(settings)


def test_claims_table_read_back_from_headless_chromium(tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (Debian package `chromium`)")
    settings = write_inputs(tmp_path)
    write(settings)
    profile = tmp_path / "chromium-profile"
    out = subprocess.run(
        [
            str(CHROMIUM),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            settings.html_path.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    page = parse(out.stdout)
    claims = json.loads((tmp_path / "reports/agent_eval/claims.json").read_text())
    assert page.claims[0] == ["#", "Claim", "Measured (this run)", "Verdict"]
    body = page.claims[1:]
    assert [row[0] for row in body] == [str(r["id"]) for r in claims["rows"]]
    assert [row[3] for row in body] == [r["verdict"] for r in claims["rows"]]
    assert all(row[2] == " ".join(r["numbers"].split()) for row, r in zip(body, claims["rows"], strict=True))
    assert page.sections.get("claims") == "yes"
    shutil.rmtree(profile, ignore_errors=True)


def test_stage_logs_the_report_to_the_parent_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mlflow

    from mimesis_rl.tracking import pipeline_run
    from tasks import report as stage
    from tasks._runner import main

    write_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    params = {
        "profile": "tiny",
        "seed": 0,
        "profiles": {"tiny": {}},
        "report": {"output": "reports/mimesis_report", "dialogues": 2},
    }
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pipeline_run(params={"profile": "tiny"}, root=tmp_path) as parent:
        metrics = main(stage.STAGE, stage.run, stage.inputs, argv=["--params", str(tmp_path / "params.yaml")])
    assert metrics["sections_produced"] == len(SECTIONS) and metrics["logged_to_parent"] == 1
    assert json.loads((tmp_path / "metrics/report.json").read_text())["dialogues"] == 2
    client = mlflow.MlflowClient()
    on_parent = {Path(f.path).name for f in client.list_artifacts(parent.info.run_id, "report")}
    assert on_parent == {"mimesis_report.html", "mimesis_report.md"}
    child = next(
        r
        for r in mlflow.search_runs(experiment_names=["mimesis"], output_format="list")
        if r.data.tags.get("mimesis.stage") == "report"
    )
    assert child.data.tags["mimesis.parent_run_id"] == parent.info.run_id
    assert {Path(f.path).name for f in client.list_artifacts(child.info.run_id, "report")} == on_parent
    html = (tmp_path / "reports/mimesis_report.html").read_text()
    assert parent.info.run_id in html


def test_curves_section_appears_when_a_stage_recorded_curve_points(tmp_path: Path) -> None:
    settings = write_inputs(tmp_path)
    write(settings, {"profile": "tiny"})
    assert 'id="curves"' not in settings.html_path.read_text()  # no points: no section, nothing missing
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    points = [{"step": s, "success_rate": 0.1 * i, "mean_reward": 0.2 * i, "acted_rate": 0.5}
              for i, s in enumerate((0, 2, 4, 8))]
    (metrics / "agent_rl@mimesis.json").write_text(json.dumps({"curve": points}))
    (metrics / "sim_rl.json").write_text(json.dumps({"curve": [{"step": 0, "decision_accuracy": 0.25},
                                                               {"step": 3, "decision_accuracy": 0.5}]}))
    summary = write(settings, {"profile": "tiny"})
    html, md = settings.html_path.read_text(), settings.md_path.read_text()
    page = parse(html)
    assert page.sections.get("curves") == "yes" and summary["sections"]["curves"] == 1
    assert 'href="#curves"' in html  # in the navigation, after generalisation
    assert html.index('id="generalisation"') < html.index('id="curves"') < html.index('id="claims"')
    assert 'id="curve-sim_rl"' in html and 'id="curve-agent_rl@mimesis"' in html
    assets = settings.html_path.parent / f"{settings.html_path.stem}_files"
    for png in ("simulator_curves.png", "agent_curves.png"):
        assert (assets / png).read_bytes()[:4] == b"\x89PNG"
        assert f"]({assets.name}/{png})" in md
    assert "| 8 | 0.500 | 0.600 | 0.300 |" in md  # acted_rate, mean_reward, success_rate at step 8

