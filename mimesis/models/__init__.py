"""Model loading (base models by profile), chat templates and batched generation."""
