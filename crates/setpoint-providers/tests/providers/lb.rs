//! CONTRACT SKELETON (providers-base): the helper `lb` writes these tests.
