"""What writes records: feed files read, validated and upserted; the feed registry;
operators' commodity mappings; the demo data set. Each change brings the kept views
up to date in its own transaction (`store.views.upkeep`)."""
