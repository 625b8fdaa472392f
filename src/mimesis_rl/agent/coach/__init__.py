"""The CSD coach: one short note per agent turn, written from what the agent could not see.

After a rollout, for each agent turn the coach reads the user's *following* turns (their private
reasoning, their messages, the behaviour patterns they showed), the goal card with its private
slots, and whether the dialogue ended; it writes advice for that turn ("the user is holding back
their budget; ask about it before you propose"). The notes feed the CSD teacher (`agent.csd`).

Three backends, like the reasoning writers (`behavior.reasoning`):

- `template`: deterministic, from the patterns, a small cue lexicon over the reasoning, the private
  slots (by label, never by value) and numeric hints (direction only: "they will not pay that much");
- `model`: the base model prompted with the same facts (adapters off); a note that comes back empty or
  too short falls back to the template note for that turn;
- `llm`: an OpenAI-compatible endpoint (`behavior.openai_client`), same prompt and fallback.

Notes must tell the agent what to do, not hand it the hidden facts: `leaks` finds private slot values
written verbatim in a note, and `redact` replaces them by the slot's label. The CSD driver measures
the raw leak rate per backend and redacts before the note reaches the teacher.

Modules: `context` (what a coach may read: `CoachContext`, from a trace, a state or a record), `base`
(the `Coach` interface, the backend names, a note's shape), `leaks` (the leak guard), `template`,
`prompt` (the prompt and the fallback rule the prompted backends share), `model`, `llm`, and
`factory` (`build_coach`: a backend from params.yaml). Import from the module that holds a name.
"""
