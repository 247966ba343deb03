"""Stand-in of Tailor's ``sidecar`` package (see ../README.md)."""
