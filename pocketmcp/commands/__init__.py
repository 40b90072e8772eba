"""The command line's commands, each importing only what it needs."""
