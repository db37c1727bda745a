//! (issue 19: apf — filled in by its part)
