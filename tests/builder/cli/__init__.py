"""Tests of builder/cli/, in files named after its modules where one module is tested."""
