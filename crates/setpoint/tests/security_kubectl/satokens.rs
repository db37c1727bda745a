//! (issue 19: satokens — filled in by its part)
