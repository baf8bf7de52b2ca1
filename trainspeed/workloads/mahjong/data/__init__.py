"""Mahjong's data: its shard schema, self-play, mjai logs and import, column checks, the loader
spec and the `trainspeed data` commands.

The generic pieces (shard files, the sample order, the per-rank loader, verify) are in
`trainspeed.data`; this package says what is Mahjong's: the columns, how games become samples,
which samples are legal, and which batch tensors the policy trains on.
"""
