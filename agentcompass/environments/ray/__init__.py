"""The ``ray_docker`` environment provider: Docker sandboxes on the nodes of a Ray cluster."""
