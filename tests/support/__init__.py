"""Test support importable by name from actor processes (tests.support.<module>)."""
