"""Interactive task environments, scripted users and agents, and the simulator panel."""
