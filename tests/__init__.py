"""The kit's tests: a package, so test modules and scripts import shared helpers as `tests.helpers`."""
