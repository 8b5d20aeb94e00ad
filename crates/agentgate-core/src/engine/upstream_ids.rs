//! The task store as the backends' book of upstream ids: which principal
//! each Q Business conversation or A2A context belongs to (see
//! [`agentgate_backend::UpstreamIds`]). Every step's [`JobContext`](agentgate_backend::JobContext)
//! gets it, so a binding made on one instance holds on all of them.

use std::sync::Arc;

use agentgate_backend::engine::UpstreamIdBook;
use agentgate_backend::{BoxFuture, Owner, OwnershipError};

use crate::clock::Clock;
use crate::store::TaskStore;

/// [`UpstreamIdBook`] over the task store.
pub(super) struct StoreUpstreamIds {
    pub(super) store: Arc<dyn TaskStore>,
    pub(super) clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for StoreUpstreamIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreUpstreamIds")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl UpstreamIdBook for StoreUpstreamIds {
    fn bind<'a>(
        &'a self,
        namespace: &'a str,
        id: &'a str,
        owner: &'a Owner,
    ) -> BoxFuture<'a, Result<Owner, OwnershipError>> {
        Box::pin(async move {
            self.store
                .bind_upstream_id(namespace, id, owner, self.clock.now())
                .await
                .map_err(|e| OwnershipError(Box::new(e)))
        })
    }

    fn owner_of<'a>(
        &'a self,
        namespace: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<Option<Owner>, OwnershipError>> {
        Box::pin(async move {
            self.store
                .upstream_id_owner(namespace, id)
                .await
                .map_err(|e| OwnershipError(Box::new(e)))
        })
    }
}
