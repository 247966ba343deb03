"""The token budget of seeds 003/004 (CONTRACT §9): counting tokens as the model does; the
budgeted assembly, summaries and long memory come here next (issue 11)."""
