"""Tests of generation/planning/, in files named after its modules where one module is tested."""
