"""A small tool-loop coding agent. Reads the task, runs shell commands, edits files, submits."""
