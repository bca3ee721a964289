"""The store's database: engines and sessions, the schema, migrations, stored settings."""
