//! The project's pages under `docs/`, compiled into these crate docs so that
//! `cargo doc` reads them and `cargo test --doc` compiles their Rust blocks
//! (a page's other blocks name their language: `text`, `sh`, `toml`, …).
//! Two pages live with the crate they are about: the backend SDK's
//! `agentgate_backend::guide` (`docs/backends/write-a-backend.md`) and the
//! test harness's `agentgate_testkit::guide` (`docs/testing.md`).
//!
//! Read them on GitHub, where their links work: start at `docs/README.md`.

#[doc = include_str!("../../../docs/README.md")]
pub mod index {}

#[doc = include_str!("../../../docs/user-guide.md")]
pub mod user_guide {}

#[doc = include_str!("../../../docs/operations.md")]
pub mod operations {}

#[doc = include_str!("../../../docs/architecture.md")]
pub mod architecture {}

#[doc = include_str!("../../../docs/conformance.md")]
pub mod conformance {}

/// One page per backend (`docs/backends/`).
pub mod backends {
    #[doc = include_str!("../../../docs/backends/qbusiness.md")]
    pub mod qbusiness {}

    #[doc = include_str!("../../../docs/backends/copilot.md")]
    pub mod copilot {}

    #[doc = include_str!("../../../docs/backends/a2a.md")]
    pub mod a2a {}
}
