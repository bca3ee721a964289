"""What comes in: feed files read, validated and upserted; the feed registry; the demo data set."""
