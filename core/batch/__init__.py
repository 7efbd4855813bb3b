"""Many transcripts at once: the batch runner (process pool), the Ray engine, and conversation-per-line datasets."""
