"""Programs copied into sandboxes (stdlib only): the egress proxy and the model relay, and the copy loop they share."""
