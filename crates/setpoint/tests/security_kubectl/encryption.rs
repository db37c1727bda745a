//! (issue 19: encryption — filled in by its part)
