"""The plugin's SQLite store: summaries, marks, memories, direct messages, message search."""
