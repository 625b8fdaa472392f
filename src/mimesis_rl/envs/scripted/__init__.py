"""Rule-based parties with no language model: scripted users (behaviour knobs) and scripted agents."""
