"""The context engine: content, compile, history, branches, merge, reset, gc (used through Tract)."""
