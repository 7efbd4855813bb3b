"""Reading a transcript without compacting it: where tokens go (stats), what changed (diff), what a provider would accept (provider checks)."""
