"""Scored runs of an environment (evals) and the leaderboards made of them."""
