"""The user simulator: prompt format, role flipping and the run-time participant."""
