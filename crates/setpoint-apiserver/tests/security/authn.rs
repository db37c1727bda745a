//! Authentication (issue 19): the API served over HTTPS in this process, driven with the real
//! kubectl — ServiceAccount tokens from `kubectl create token` (audiences, expiry, tampering,
//! binding to a pod or a Secret and dying with it), TokenReview, issuer discovery and its JWKS
//! verifying a token, legacy Secret tokens only on request, the static token file and
//! bootstrap tokens, `kubectl auth whoami`.

mod serving;
mod tokens;
mod users;
