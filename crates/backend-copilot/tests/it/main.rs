//! The Copilot backend's integration tests, one binary (one link of the
//! engine, apollo-compiler and proptest instead of one per file):
//!
//! - `graphql_contract`: every GraphQL document the backend sends, validated
//!   against GitHub's published schema;
//! - `prop_github`: hostile GitHub answers and hostile arguments, as
//!   properties.

mod graphql_contract;
mod prop_github;
