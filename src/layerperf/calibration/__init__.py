"""This machine's peaks: measured by ``layerperf calibrate`` (:mod:`.measure`), stored and read back
for the roofline and the "% of peak" column (:mod:`.peaks`)."""
