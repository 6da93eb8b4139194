"""Tests of generation/stages/, in files named after its modules where one module is tested."""
