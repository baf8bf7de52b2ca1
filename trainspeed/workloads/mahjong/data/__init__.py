"""Mahjong's data: self-play, mjai logs and their import, and the `trainspeed data` commands."""
