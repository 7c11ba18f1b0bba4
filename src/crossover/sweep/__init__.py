"""Sweeps: several targets over several load levels, resumable, with scraping."""
