"""The 13 realistic user behaviours: catalogue, rule-based detectors and annotators."""
