"""The names of the kinds of facts a verifier is calibrated on (a leaf module: no imports)."""

GIVEN = "given"  # the calibration of facts given in the input (the paper's facts of the training bios)
