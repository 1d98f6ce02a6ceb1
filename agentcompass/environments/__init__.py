"""Environment providers: where an agent's commands run (``local`` temp workspaces, ``docker`` containers)."""
