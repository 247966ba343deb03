"""Quality benchmarks on public data that no one here wrote (read ``snapshot.py`` first)."""
