//! (issue 19: csr — filled in by its part)
