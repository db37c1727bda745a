//! The GitOps loops against an API server in the test process, with git repositories the tests
//! make with `git`: `source` (GitRepository), `sync` (Sync).

mod source;
mod sync;
