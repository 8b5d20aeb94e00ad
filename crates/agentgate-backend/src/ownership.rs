//! Upstream ids that belong to a principal: a Q Business conversation, an
//! A2A context. Every principal on a shared gateway speaks upstream through
//! the gateway's own credentials, so an upstream id alone would let one
//! principal continue another's conversation. A backend therefore binds each
//! id it was given upstream to the task's owner, and before it continues one
//! it checks that the id is bound to the caller:
//!
//! ```text
//! step ──upstream answers with a new conversation id──▶ cx.upstream_ids().bind(ns, id)
//! start(args with an id) ──cx.upstream_ids().owns(ns, id)?──┬─ yes ─▶ continue upstream
//!                                                           └─ no ──▶ refused as unknown
//! ```
//!
//! An id bound to another principal and an id never bound are refused
//! alike: the same check (one store read) and the same answer, so a refusal
//! tells nobody whether the id exists. The engine backs the handle with the
//! task store, so bindings hold on every instance and across restarts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::{BoxFuture, Owner};

/// A store of bindings could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("the record of which principal owns upstream ids is unavailable: {0}")]
pub struct OwnershipError(#[source] pub Box<dyn std::error::Error + Send + Sync>);

/// What [`UpstreamIds`] calls: the engine's task store, or a test's map.
pub trait UpstreamIdBook: Send + Sync + std::fmt::Debug + 'static {
    /// Binds `id` of kind `namespace` to `owner` unless it is bound, and
    /// returns the principal it is bound to (the first binder).
    fn bind<'a>(
        &'a self,
        namespace: &'a str,
        id: &'a str,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<Owner, OwnershipError>>;

    /// The principal `id` of kind `namespace` is bound to, if any.
    fn owner_of<'a>(
        &'a self,
        namespace: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Owner>, OwnershipError>>;
}

/// The bindings of upstream ids to principals, as one task's step sees
/// them: every call acts for the task's owner.
#[derive(Clone)]
pub struct UpstreamIds {
    book: Arc<dyn UpstreamIdBook>,
    owner: Owner,
}

impl std::fmt::Debug for UpstreamIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamIds")
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

impl UpstreamIds {
    /// Bindings in `book`, acting for `owner`.
    pub fn new(book: Arc<dyn UpstreamIdBook>, owner: Owner) -> Self {
        Self { book, owner }
    }

    /// Binds an id upstream just gave this task (a new conversation) to the
    /// task's owner. Returns `false` when the id was already another
    /// principal's: upstream answered into someone else's conversation, and
    /// the answer must not be shown.
    pub async fn bind(&self, namespace: &str, id: &str) -> Result<bool, OwnershipError> {
        let bound = self.book.bind(namespace, id, &self.owner).await?;
        Ok(bound == self.owner)
    }

    /// Whether `id` is bound to the task's owner. An id of another
    /// principal and an id never bound are both `false`.
    pub async fn owns(&self, namespace: &str, id: &str) -> Result<bool, OwnershipError> {
        let bound = self.book.owner_of(namespace, id).await?;
        Ok(bound.as_ref() == Some(&self.owner))
    }
}

/// Bindings kept in this process only: for tests and for running a job
/// outside the engine. The engine always uses the task store's.
#[derive(Debug, Default)]
pub struct InMemoryUpstreamIds(Mutex<HashMap<(String, String), Owner>>);

impl UpstreamIdBook for InMemoryUpstreamIds {
    fn bind<'a>(
        &'a self,
        namespace: &'a str,
        id: &'a str,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<Owner, OwnershipError>> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let bound = map
            .entry((namespace.to_owned(), id.to_owned()))
            .or_insert_with(|| owner.clone())
            .clone();
        Box::pin(std::future::ready(Ok(bound)))
    }

    fn owner_of<'a>(
        &'a self,
        namespace: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Owner>, OwnershipError>> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let bound = map.get(&(namespace.to_owned(), id.to_owned())).cloned();
        Box::pin(std::future::ready(Ok(bound)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_id_is_its_first_binders_and_nobody_elses() {
        let book: Arc<dyn UpstreamIdBook> = Arc::new(InMemoryUpstreamIds::default());
        let alice = UpstreamIds::new(Arc::clone(&book), Owner::new("token:alice"));
        let bob = UpstreamIds::new(book, Owner::new("token:bob"));
        assert!(!alice.owns("q", "c1").await.expect("owns"), "never bound");
        assert!(alice.bind("q", "c1").await.expect("bind"));
        assert!(alice.owns("q", "c1").await.expect("owns"));
        assert!(!bob.owns("q", "c1").await.expect("owns"));
        assert!(!bob.bind("q", "c1").await.expect("bind"), "alice keeps it");
        assert!(!bob.owns("q", "c1").await.expect("owns"));
        assert!(
            bob.bind("other", "c1").await.expect("bind"),
            "namespaces apart"
        );
    }
}
