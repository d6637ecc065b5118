"""Engine tests: operations, state machine against a model, sync invariant, concurrency, reopen."""
