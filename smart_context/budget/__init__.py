"""The token budget (docs/contract.md §9), in one folder: counting tokens as the model does (tokens,
calibration), what the budget knows of each message (facts), the importance score, the pure
plan (plan), the request's parts and their costs (parts), the budget applied to one request's
history (budgeter) and why each message went (reasons)."""
