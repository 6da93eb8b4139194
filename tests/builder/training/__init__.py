"""Tests of builder/training/, in files named after its modules where one module is tested."""
