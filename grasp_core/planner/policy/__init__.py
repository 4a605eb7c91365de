"""The ``policy`` planner kind (the ``cpu`` planner): a policy over candidate plans and the chooser over executed ones."""
