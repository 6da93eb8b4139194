"""The repository's own machinery: the Makefile, the CI workflows, the wheel."""
