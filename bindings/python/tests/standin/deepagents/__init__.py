"""A stand-in for the deepagents package, written for agentbox's tests from
the documented shape of deepagents 0.7's backend protocol (names, fields,
defaults): only what agentbox imports. It is not deepagents."""
