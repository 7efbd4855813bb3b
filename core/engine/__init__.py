"""The compaction engine: one run over a working list, and what the run's steps share.

- pipeline: one run: count, warn, the strategies and the closing steps, the report
- closing: the registered closing steps (repair, clamp_pinned, turn_boundary, thinking_after_change,
  give_back) the policy lists
- workspace: the working list strategies act on, its invariants and the ledger of what went
- ledger: the typed entry for each message a run removed or rewrote (the report's ``removed``)
- budget: the budget a run compacts to
- settings: what a run is handed: the resolved strategies, the policy, the budget's inputs
- policy: what a preset decides: shares of the budget, pins, traces, passes, closing steps
- structure: how the list hangs together: turns, calls with their results, pins
- placeholders: the short texts strategies leave behind, recognised on a rerun
- clamp: cutting the middle out of a long text to a token count
- records: cutting a JSON text of records field by field, each keeping its ids, paths and links
- fit: the chooser: the only reader of the aim and fill shares; give_back fills the room left
- bound_thinking: the thinking blocks a change leaves a provider unable to accept
- file_calls: what a tool call does to a file: reads it (which part) or changes it
- later_use: which tool results the agent went on to use
- seams: the store and the summarizer a run's strategies may use
"""
