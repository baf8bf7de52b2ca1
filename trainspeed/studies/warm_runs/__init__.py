"""A study's runs trained one after another in a few warm processes (`runner.py`, `worker.py`)."""
