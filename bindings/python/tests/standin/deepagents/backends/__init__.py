"""Stand-in: deepagents.backends (see the package's docstring)."""
