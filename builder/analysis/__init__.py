"""Analysis over judgments and releases: label agreement, retrieval complexity, evaluation, simulation."""
