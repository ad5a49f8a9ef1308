"""Name server: route tables (routes.py), request processor core (processor.py), actor adapter."""
