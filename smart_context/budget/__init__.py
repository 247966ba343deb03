"""The token budget (CONTRACT §9), in one folder: counting tokens as the model does (tokens,
calibration), what the budget knows of each message (facts), seed 003's importance, the pure
plan (plan), the request's parts and their costs (parts), the budget applied to one request's
history (budgeter) and why each message went (reasons)."""
