//! `subscriptions/listen`: the open streams the list-change triggers
//! notify.

use super::*;

impl Everything {
    /// `ServerHandler::accepted_subscription_filter`: every requested
    /// category is accepted; rmcp then narrows it to the advertised
    /// capabilities (tools and prompts `listChanged`).
    pub(crate) fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    /// `ServerHandler::listen`: keeps the stream registered until the client
    /// goes away, so the list-change triggers can reach it.
    pub(crate) async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let id = self.next_subscription.fetch_add(1, Ordering::Relaxed);
        self.sinks().insert(id, context.sink().clone());
        context.cancelled().await;
        self.sinks().remove(&id);
        Ok(())
    }

    pub(super) fn sinks(&self) -> std::sync::MutexGuard<'_, HashMap<u64, SubscriptionSink>> {
        self.subscriptions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends one notification to every open subscription. The sink drops
    /// categories a stream did not subscribe to; closed streams are forgotten.
    pub(super) async fn broadcast<F, Fut>(&self, send: F)
    where
        F: Fn(SubscriptionSink) -> Fut,
        Fut: Future<Output = Result<(), SubscriptionSendError>>,
    {
        let sinks: Vec<(u64, SubscriptionSink)> = self
            .sinks()
            .iter()
            .map(|(id, sink)| (*id, sink.clone()))
            .collect();
        for (id, sink) in sinks {
            match send(sink).await {
                Ok(()) | Err(SubscriptionSendError::NotificationNotAccepted(_)) => {}
                Err(error) => {
                    tracing::debug!(%error, subscription = id, "dropping subscription");
                    self.sinks().remove(&id);
                }
            }
        }
    }
}
