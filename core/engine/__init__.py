"""The compaction engine: one run over a working list (pipeline), its invariants (workspace), the budget, turns and pins (structure), and the seams strategies may use."""
