"""Tests of builder/analysis/, in files named after its modules where one module is tested."""
