"""Counting tokens: the tokenizer backends, the per-run counter with its caches, and the models table."""
