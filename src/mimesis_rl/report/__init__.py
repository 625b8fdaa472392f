"""The MIMESIS report: one static page (HTML, plus the same in Markdown) with the run's evidence.

It reads what the other stages wrote and renders seven sections, each saying plainly "not produced
by this run" when its input is missing:

1. data validation (records in / valid / quarantined by reason, PII flags) — `validate`;
2. behaviour patterns, real vs simulated (share of turns per pattern) — `sim_eval` (+ `label`);
3. the fidelity table with intervals, turn format, opening turns, environment rows — `sim_eval`;
4. sample dialogues: the simulator's private reasoning beside each user message, the coach's note
   beside each agent turn (written into the transcripts by the stage that played them:
   `eval.coach_notes`) — `agent_eval` (or `sim_eval`'s environment transcripts);
5. generalisation to unseen simulators (heatmaps, paired differences) and the paper's claims table
   with verdicts — `agent_eval`; and the promotion gate's decision line — `promote`;
6. learning curves, only when a training stage recorded curve points (`curve` in metrics/*.json,
   e.g. `sim_rl`, `agent_rl@<variant>`): each metric against the training step.

Nothing is computed here: numbers, notes and verdicts come from the stages' files, so the report
and the stages agree. The page is self-contained (inline CSS, images as base64 PNG by default, no
scripts, no CDN), so it reads offline and survives being mailed around.

Modules: `settings` (params.yaml `report`), `inputs` (reading the stages' files and PNGs), `cells`
(number formatting shared by both templates), `charts` (the charts drawn from read numbers),
`sections`, `dialogues` and `curves` (each section's data), `render` (assembling and writing both files).
"""
