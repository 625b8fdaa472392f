"""Behaviour patterns of real users: the 13-pattern taxonomy, labelers, and private reasoning traces."""
