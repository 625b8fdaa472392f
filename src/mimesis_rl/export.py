"""`mimesis export MODEL_URI DIR`: a trained simulator or agent as a plain Hugging Face model folder.

    mimesis export models:/mimesis-simulator@champion exports/simulator
    python -c "from transformers import pipeline; ..."     # no mimesis_rl needed to use it

Why: a team that outgrows one machine serves models with vLLM/SGLang/TGI or loads them with
`transformers` alone; they cannot depend on this package to unpack a LoRA adapter, a manifest and a
turn format. The folder holds:

- merged weights (`model.safetensors`; a LoRA adapter is merged into its base) and `config.json`;
- the tokenizer, with a chat template that plays the user (a simulator): the system message is the
  goal card, the agent's turns are `user`, the simulated user's turns are `assistant`, and the
  generation prompt opens the user's private reasoning with `<think>` (as the runtime forces it;
  vLLM's `deepseek_r1` reasoning parser splits it off). An agent keeps the plain ChatML template;
- `generation_config.json`: the registered decoding (temperature, top-p, turn budget, stop tokens);
- `README.md`: a model card whose YAML front-matter the Hub reads (base model, licence, tags, data
  and their licences), lineage to the registry version, run and git commit, the fidelity table when
  one is at hand, intended use, limits, and how to prompt it with a goal card;
- `mimesis_export.json`: the same facts as data (and `leave.json`, the learned leave model, when the
  simulator has one: a runtime that wants the calibrated leave decision reads it).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mimesis_rl.fsutil import swap_in_dir, write_json
from mimesis_rl.models.chat_template import BOS, END_OF_TURN, chatml_template
from mimesis_rl.models.inference.sources import is_mlflow_uri, resolve_source
from mimesis_rl.simulator.format import END_MARKER, FORMAT_VERSION, OPENING_CUE, THINK_CLOSE, THINK_OPEN

log = logging.getLogger(__name__)

# What the project knows about the corpora its adapters read: (where it comes from, Hub dataset id or
# None, licence as its source states it).
CORPORA: dict[str, tuple[str, str | None, str]] = {
    "chitchat": ("BYU-PCCL chitchat-dataset (PyPI `chitchat-dataset`)", None, "mit"),
    "casino": ("CaSiNo (Chawla et al., 2021)", "kchawla123/casino", "cc-by-4.0"),
}
BASES: dict[str, str] = {"smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct"}


@dataclass
class ExportInfo:
    """Everything the model card says, as data (`mimesis_export.json`)."""

    source: str
    role: str
    kind: str
    base_model: str | None
    base_kind: str
    format_version: str | None
    generation: dict[str, Any]
    datasets: list[dict[str, str]] = field(default_factory=list)
    registry: dict[str, Any] = field(default_factory=dict)
    git_commit: str | None = None
    fidelity: dict[str, Any] | None = None
    license: str = "apache-2.0"


def user_chat_template() -> str:
    """ChatML whose generation prompt opens the simulated user's reasoning with `<think>`; without a
    system message it renders a neutral goal-less card, so the model is still told it is the user."""
    from mimesis_rl.simulator.cards import system_card

    template = chatml_template(default_system=system_card("general"))
    plain = "{%- if add_generation_prompt %}{{ '" + BOS + "assistant\n' }}{%- endif %}"
    assert plain in template
    return template.replace(plain, "{%- if add_generation_prompt %}{{ '" + BOS + "assistant\n"
                            + THINK_OPEN + "' }}{%- endif %}")


def _registry_facts(uri: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(registry facts, the promotion gate's recorded metrics) of a `models:/` URI."""
    import mlflow

    from mimesis_rl.config import tracking_uri
    from mimesis_rl.tracking.chain import _aliases, _version, parse_model_uri
    from mimesis_rl.tracking.promotion import recorded_metrics

    mlflow.set_tracking_uri(tracking_uri())
    name, alias, number = parse_model_uri(uri)
    client = mlflow.MlflowClient()
    version = _version(client, name, alias, number)
    tags = dict(version.tags or {})
    facts = {"uri": uri, "name": name, "version": str(version.version),
             "aliases": _aliases(client, name, version.version), "run_id": version.run_id,
             "tracking_uri": mlflow.get_tracking_uri(),
             **{k.removeprefix("mimesis."): v for k, v in tags.items() if k.startswith("mimesis.")}}
    metrics = {k: {"value": m.value, "low": m.low, "high": m.high} for k, m in recorded_metrics(tags).items()}
    return facts, metrics or None


def _datasets(params: Mapping[str, Any]) -> list[dict[str, str]]:
    out = []
    for source in (params.get("ingest") or {}).get("sources") or []:
        name = str(source.get("adapter", ""))
        where, hub, licence = CORPORA.get(name, (name, None, "unknown (check the source)"))
        out.append({"adapter": name, "dataset": where, "hub_id": hub or "", "license": licence,
                    "input": str(source.get("input", ""))})
    return out


def _fidelity(path: Path | None, row: str | None) -> dict[str, Any] | None:
    """One simulator's row of a sim_eval `fidelity.json` (the named row, or the only one)."""
    if path is None or not path.exists():
        return None
    from mimesis_rl.eval.fidelity import summary_row

    results = json.loads(path.read_text()).get("results") or {}
    if row is None and len(results) == 1:
        row = next(iter(results))
    if row not in results:
        raise ValueError(f"{path}: no row {row!r} (rows: {', '.join(results)}); pass --fidelity-row")
    return {"report": str(path), "row": row, "metrics": summary_row(results[row])}


def export_model(spec: str, out_dir: str | Path, *, base_model: str | Path = "models/base",
                 fidelity: str | Path | None = None, fidelity_row: str | None = None,
                 params: Mapping[str, Any] | None = None) -> ExportInfo:
    """Write the export of `spec` (a MIMESIS model folder or `models:/name@alias`) into `out_dir`."""
    import torch
    from peft import PeftModel
    from transformers import GenerationConfig

    from mimesis_rl.models.loading import load_base, load_tokenizer

    source = resolve_source(spec, base_model)
    manifest = source.manifest
    if manifest is None:
        raise ValueError(f"{spec}: not a MIMESIS model folder (no mimesis.json): nothing says what it is")
    if manifest.kind == "prompted":
        raise ValueError(f"{spec}: a prompted user has no weights of its own; export its base model instead")
    model, _ = load_base(source.base, dtype=torch.float32, device="cpu")
    tokenizer = load_tokenizer(source.tokenizer or source.base)
    if source.adapter is not None:
        model = PeftModel.from_pretrained(model, str(source.adapter)).merge_and_unload()
    simulator = manifest.role == "simulator"
    tokenizer.chat_template = user_chat_template() if simulator else chatml_template()

    sampling = manifest.sampling
    stop_ids = [tokenizer.convert_tokens_to_ids(t) for t in (END_OF_TURN, tokenizer.eos_token)]
    generation = GenerationConfig(
        do_sample=sampling.do_sample, temperature=sampling.temperature if sampling.do_sample else None,
        top_p=sampling.top_p if sampling.do_sample else None, top_k=sampling.top_k or None,
        max_new_tokens=sampling.max_new_tokens, eos_token_id=sorted({i for i in stop_ids if i is not None}),
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id)

    params = dict(params or {})
    registered = is_mlflow_uri(spec) and spec.startswith("models:/")
    registry, gate = _registry_facts(spec) if registered else ({}, None)
    folder = source.folder
    fidelity_file = Path(fidelity) if fidelity else (folder / "fidelity.json" if folder else None)
    base_manifest = dict(manifest.base.get("manifest") or {})
    base_kind = str(base_manifest.get("kind", "unknown"))
    info = ExportInfo(
        source=spec, role=manifest.role, kind=manifest.kind,
        base_model=BASES.get(base_kind)
        or (base_manifest.get("source") if base_kind == "pretrained" else None),
        base_kind=base_kind, format_version=manifest.format.get("version"), generation=asdict(sampling),
        datasets=_datasets(params), registry=registry,
        git_commit=registry.get("git_commit") or _commit(),
        fidelity=_fidelity(fidelity_file, fidelity_row) or ({"gate_metrics": gate} if gate else None))

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staged = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(staged, ignore_errors=True)
    try:
        model.save_pretrained(staged, safe_serialization=True)
        tokenizer.save_pretrained(staged)
        generation.save_pretrained(staged)
        if folder is not None and (folder / "leave.json").exists():
            shutil.copy2(folder / "leave.json", staged / "leave.json")
        write_json(staged / "mimesis_export.json", asdict(info))
        (staged / "README.md").write_text(model_card(info))
        swap_in_dir(staged, out_dir)  # the export appears whole or not at all
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    log.info("exported %s to %s", spec, out_dir)
    return info


def _commit() -> str | None:
    from mimesis_rl.config import project_root
    from mimesis_rl.tracking.lineage import git_commit

    commit = git_commit(project_root())
    return None if commit == "unknown" else commit


# ----------------------------------------------------------------------------------------------
# The model card
# ----------------------------------------------------------------------------------------------

def _front_matter(info: ExportInfo) -> dict[str, Any]:
    tags = ["mimesis", "text-generation", "conversational"]
    tags += ["user-simulator", "role-play"] if info.role == "simulator" else ["agent", "grpo"]
    data: dict[str, Any] = {"license": info.license, "library_name": "transformers",
                            "pipeline_tag": "text-generation", "tags": tags, "language": ["en"]}
    if info.base_model:
        data["base_model"] = info.base_model
        data["base_model_relation"] = "finetune"  # a LoRA adapter is merged into the exported weights
    hub = [d["hub_id"] for d in info.datasets if d.get("hub_id")]
    if hub:
        data["datasets"] = hub
    return data


def _fidelity_table(fidelity: Mapping[str, Any] | None) -> str:
    if not fidelity:
        return "No fidelity report was at hand at export time (`mimesis sim eval` writes one).\n"
    gate = fidelity.get("gate_metrics") or {}
    metrics = fidelity.get("metrics") or {k: v["value"] for k, v in gate.items()}
    where = (f"row `{fidelity['row']}` of `{fidelity['report']}`" if "row" in fidelity
             else "the promotion gate's recorded metrics")
    lines = [f"From {where}:", "", "| metric | value |", "|---|---|"]
    lines += [f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |" for k, v in metrics.items()]
    return "\n".join(lines) + "\n"


def model_card(info: ExportInfo) -> str:
    """README.md: YAML front-matter the Hub validates, then the card."""
    import yaml

    reg = info.registry
    lineage = [f"- exported from `{info.source}` ({info.kind} {info.role}"
               + (f", turn format `{info.format_version}`)" if info.format_version else ")")]
    if reg:
        lineage.append(f"- registry: `{reg['name']}` version {reg['version']}"
                       + (f" (aliases: {', '.join(reg['aliases'])})" if reg.get("aliases") else "")
                       + f", run `{reg.get('run_id')}`, tracking `{reg.get('tracking_uri')}`")
        for key in ("data_version", "parent_run_id", "stage", "trained_against", "simulator_version"):
            if reg.get(key):
                lineage.append(f"- {key.replace('_', ' ')}: `{reg[key]}`")
    lineage.append(f"- git commit: `{info.git_commit or 'unknown'}`")
    lineage.append(f"- base: {info.base_model or 'a local ' + info.base_kind + ' base (not on the Hub)'}")
    data_lines = [f"- `{d['dataset']}` (adapter `{d['adapter']}`), licence: {d['license']}"
                  for d in info.datasets]
    g = info.generation
    decoding = (f"`do_sample={g['do_sample']}`, temperature {g['temperature']}, top-p {g['top_p']}, "
                f"at most {g['max_new_tokens']} new tokens per turn")
    if info.role == "simulator":
        use = f"""## Intended use

A **user simulator**: it plays the *user* of a task-oriented or casual chat, given a goal card, so that
assistants/agents can be trained (RL environments) and evaluated against realistic users, who are vague,
withhold private facts, push back, change their minds and leave. It is not an assistant and must not
be deployed to talk to people as one.

## How to prompt it

The system message is the user's goal card; the agent's messages are `user` turns; the simulated user
answers as `assistant`. The chat template opens the answer with `{THINK_OPEN}`: the model first writes
its private reasoning, closes it with `{THINK_CLOSE}`, then the message the agent may see. When it
writes `{END_MARKER}` the user has left. When the user speaks first, send `{OPENING_CUE}` as the
first `user` message.

```python
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("PATH")
model = AutoModelForCausalLM.from_pretrained("PATH")
card = ("You are a real person (the user) in a conversation about shopping. Stay in character: you are "
        "the user, never the assistant. Do not offer help; you are the one who wants something.\\n"
        "Your goal: Buy a waterproof jacket.\\nWhat you know: color: green\\n"
        "Private (rather not say; reveal only if pressed, one at a time): budget: 120\\n"
        "First think privately inside {THINK_OPEN}{THINK_CLOSE}, then write only your message. "
        "When you want to leave, end your message with {END_MARKER}.")
messages = [{{"role": "system", "content": card}}, {{"role": "user", "content": "{OPENING_CUE}"}}]
ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
out = model.generate(ids)          # generation_config.json holds the registered decoding
text = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
reasoning, _, message = text.partition("{THINK_CLOSE}")   # show the agent only `message`
```

With vLLM: `vllm serve PATH --reasoning-parser deepseek_r1` puts the reasoning in `reasoning_content`.
The MIMESIS runtime (format checks, re-sampling, the learned leave decision in `leave.json`) can drive
such a server: `--user openai:http://HOST:PORT/v1#MODEL`.
"""
    else:
        use = """## Intended use

An **agent** trained with multi-turn GRPO (and CSD) against user simulators in the MIMESIS task
environments. It speaks as the assistant (plain ChatML) and ends a task with a structured action
such as `<action>{"type": "recommend", "item": "p17"}</action>`. A research artefact, not a product.
"""
    limits = """## Limits

- Trained on a CPU budget: a small model for a few steps. It proves the pipeline; it is no oracle of
  human behaviour. Check the fidelity table before trusting it as a user model.
- English only; the behaviours it imitates are those of its training corpora (and their biases).
- Without the MIMESIS runtime nothing re-samples a malformed turn or a role break: check the
  `<think>` structure yourself and discard turns whose message says it is an AI.
"""
    body = [f"# MIMESIS {info.role}", "", f"Exported with `mimesis export`. Decoding: {decoding}.", "",
            "## Lineage", "", *lineage, "", "## Training data", "",
            *(data_lines or ["- not recorded in this checkout's params.yaml"]), "",
            "## Fidelity", "", _fidelity_table(info.fidelity), use, limits]
    front = yaml.safe_dump(_front_matter(info), sort_keys=False).strip()
    return f"---\n{front}\n---\n\n" + "\n".join(body)


__all__ = ["ExportInfo", "export_model", "model_card", "user_chat_template", "FORMAT_VERSION"]
