//! CONTRACT SKELETON (providers-base): the helper `certs` writes these tests.
