"""`trainspeed plan`: which configuration reaches a quality goal soonest, predicted from measured
rows and checked by running some of them.

`inputs.py` reads and checks the rows (bench, runs, a time-to-target study), `model.py` predicts one
configuration's time, `plan.py` ranks them, `check.py` runs some to the goal, `rows.py` holds the
rows and `report.py` their part of the report.
"""

CHECK_KEYWORDS = {"best": "the recommended configuration", "samples-per-s": "the configuration samples/s alone picks",
                  "best-smaller": "the recommended one's target and devices at the next smaller fixed batch predicted",
                  "best-larger": "the recommended one's target and devices at the next larger fixed batch predicted"}
"""What `--check` takes beside configurations (here, so the command line's help imports nothing more)."""
