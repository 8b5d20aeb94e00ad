//! Rebuilds the crate when a migration changes.
//!
//! `sqlx::migrate!` embeds `migrations/` at compile time, but on stable Rust
//! cargo does not know the macro read those files: an edited or added
//! migration would leave a build (and its tests) running the old set.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
