"""The kit's tests: a package, so test modules and scripts import shared helpers as `tests.helpers`.

Folders mirror the packages: the tests of generation/backends/placement.py are tests/generation/backends/
test_placement.py (docs/architecture.md, "Where a module's tests are")."""
