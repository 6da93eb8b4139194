"""Tests of generation/bandits/, in files named after its modules where one module is tested."""
