"""Sub-questions as bandit arms (Petcu et al., arXiv:2510.18633): which (sub-question, document) pair to judge next."""
