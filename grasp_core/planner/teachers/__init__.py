"""The teachers whose plans the planners imitate: programmatic (oracle-guided) and an LLM behind an endpoint."""
