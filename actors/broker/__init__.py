"""Broker cores: config, state managers, processors and the controller (actor.py is the adapter)."""
