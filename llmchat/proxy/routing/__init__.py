"""The proxy's routing: many models over many nodes (config, nodes, health, choice)."""
