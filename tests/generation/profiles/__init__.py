"""Tests of generation/profiles/, in files named after its modules where one module is tested."""
