"""Where the reads' ranks come from: counted on the index, the aggregator's snapshot, or
checked against the generation markers."""
