"""The pipeline end to end: the demo as a user pastes it, the profiles on the sample, the examples."""
