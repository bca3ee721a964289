"""Who may read what: buyers, API keys, subscriptions, share links."""
