"""One router per resource, each a thin adapter over the admin client or metadata/."""
