//! Sync: apply, prune, drift, health, dependencies (tests owned by the sync loop).
