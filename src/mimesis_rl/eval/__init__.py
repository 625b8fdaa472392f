"""Evaluation: simulator fidelity against held-out real users, agent generalisation, reports."""
