"""Training helpers: SFT data, trainer construction, run reports."""
