"""Sub-questions as bandit arms (seeds/002): which (sub-question, document) pair to judge next."""
