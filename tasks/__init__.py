"""Pipeline stages: `python -m tasks.<stage>` reads inputs, calls mimesis_rl, writes outputs + metrics."""
