//! (issue 19: audit — filled in by its part)
