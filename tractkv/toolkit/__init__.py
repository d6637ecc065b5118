"""Tools in context: tool-result hooks, tool-call queries, and (later) the agent toolkit and executor."""
