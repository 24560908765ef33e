"""Table 3's science: intervals over seeds, family-wise verdicts, the seeds plan, its one extension, its simulation."""
