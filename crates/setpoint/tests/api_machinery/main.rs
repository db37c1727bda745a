//! Issue 16's API machinery against a `setpoint server` process, driven by the real `kubectl`:
//! one module per topic.

mod kinds;
