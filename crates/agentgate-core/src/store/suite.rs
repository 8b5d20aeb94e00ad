//! Store suite.
