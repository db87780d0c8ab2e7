"""The Helm chart rendered by the pinned helm under many value sets: what it would install."""
