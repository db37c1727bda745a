//! CONTRACT SKELETON (providers-base): the helper `postgres` writes these tests.
