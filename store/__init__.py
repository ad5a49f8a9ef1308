"""actormq store package."""
