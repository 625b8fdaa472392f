"""The eight built-in task domains, one module each (environment, scripted user, scripted agent)."""
