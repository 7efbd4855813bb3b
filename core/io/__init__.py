"""Input and output: reading raw lines and canonical transcripts, exact JSON, staged all-or-nothing writes, the shipped JSON Schemas."""
