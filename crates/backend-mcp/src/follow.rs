//! Following each server's tool list while the gateway runs: a server that
//! could not be reached at start is tried again, with backoff, until its
//! tools are listed; a server that announces changes
//! (`capabilities.tools.listChanged`) is kept connected and listed again on
//! each `notifications/tools/list_changed`, and reconnected, with backoff,
//! when it goes away. Each new listing that differs from the last is handed
//! to the engine through [`Nudge::tools_changed`], which serves it and
//! tells the gateway's own clients.
//!
//! ```text
//! follow(server) ─▶ connect (CallClient::watching)
//!   2026-07-28: subscriptions/listen {toolsListChanged}   ┐ before tools/list,
//!   older:      the session's own notification stream     ┘ so no change is missed
//!   tools/list ─▶ Server::listed ─▶ changed? Nudge::tools_changed
//!   announces no changes ─▶ close; done
//!   list_changed (or, older: 60 s passed) ─▶ tools/list again
//!   connection lost, or tools/list fails ─▶ backoff, connect again
//! ```
//!
//! A server that stays unreachable keeps the tools it last listed: a call
//! of one gets the connection's own error, and a restart of the server
//! needs no restart of the gateway.

use std::sync::Arc;
use std::time::Duration;

use agentgate_backend::Nudge;
use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter, Tool};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::Server;
use crate::upstream::{self, CallClient, Connection, Upstream};

/// The first wait before trying a server again; it doubles up to
/// [`LAST_RETRY`].
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between two tries.
const LAST_RETRY: Duration = Duration::from_secs(60);
/// How often a legacy session's connection is checked for having closed
/// (its notifications arrive on their own; its end is not announced).
const CLOSE_CHECK: Duration = Duration::from_secs(5);
/// How often a legacy session's tools are listed again, announced or not:
/// over Streamable HTTP a server that restarted (its session gone) is
/// noticed only by a request, and rmcp's client sends none by itself.
const RELIST: Duration = Duration::from_secs(60);

/// How one connection ended.
enum Ended {
    /// Listed, and the server announces no changes: nothing to follow.
    Done,
    /// Lost or never made; `listed` says whether it listed the tools first
    /// (the backoff starts over).
    Lost { listed: bool },
}

/// Follows `server`'s tool list until `shutdown` (or until there is
/// nothing to follow).
pub(crate) async fn follow(server: Arc<Server>, nudge: Nudge, shutdown: CancellationToken) {
    let mut delay = FIRST_RETRY;
    loop {
        let began = tokio::time::Instant::now();
        let ended = tokio::select! {
            () = shutdown.cancelled() => return,
            ended = follow_once(&server, &nudge) => ended,
        };
        match ended {
            Ended::Done => return,
            // Only a connection that lasted starts the backoff over: one
            // that ends as soon as it is made would be remade each second.
            Ended::Lost { listed: true } if began.elapsed() >= LAST_RETRY => delay = FIRST_RETRY,
            Ended::Lost { .. } => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(LAST_RETRY);
    }
}

/// One connection: list, then follow its announcements until it is lost.
async fn follow_once(server: &Server, nudge: &Nudge) -> Ended {
    let upstream = &server.upstream;
    let name = &upstream.settings.name;
    let (announced, mut changed) = watch::channel(0u64);
    let connection = match upstream
        .connect(CallClient::watching(announced), None)
        .await
    {
        Ok(connection) => connection,
        Err(why) => {
            server.unreachable(why.for_operator());
            return Ended::Lost { listed: false };
        }
    };
    let info = connection.peer().peer_info();
    let announces = info
        .as_ref()
        .and_then(|info| info.capabilities.tools.as_ref())
        .and_then(|tools| tools.list_changed)
        == Some(true);
    let modern = info
        .as_ref()
        .is_some_and(|info| info.protocol_version >= ProtocolVersion::V_2026_07_28);
    let mut subscription = None;
    if announces && modern {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let listen = connection.peer().listen(filter);
        match tokio::time::timeout(upstream.settings.connect_timeout, listen).await {
            Ok(Ok(opened)) if opened.acknowledged().tools_list_changed == Some(true) => {
                subscription = Some(opened);
            }
            Ok(Ok(_)) => {
                tracing::warn!(server = %name, "MCP server declares tools.listChanged but did not accept toolsListChanged on subscriptions/listen; its tools are listed once");
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %name, error = %e, "MCP server refused subscriptions/listen for tool changes; its tools are listed once");
            }
            Err(_) => {
                tracing::warn!(server = %name, "MCP server did not acknowledge subscriptions/listen in time; its tools are listed once");
            }
        }
    }
    // What was announced before this listing is in it (a server may
    // announce changes as it sets up a session, before it is listed).
    changed.mark_unchanged();
    if !list_into(server, &connection, announces, nudge).await {
        connection.close().await;
        return Ended::Lost { listed: false };
    }
    if !announces || (modern && subscription.is_none()) {
        connection.close().await;
        return Ended::Done;
    }
    let mut listed_at = tokio::time::Instant::now();
    loop {
        let news = match &mut subscription {
            Some(subscription) => match subscription.next().await {
                Ok(Some(ServerNotification::ToolListChangedNotification(_))) => true,
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => false,
            },
            None => tokio::select! {
                seen = changed.changed() => {
                    // Each listing covers every announcement before it.
                    changed.mark_unchanged();
                    seen.is_ok()
                }
                () = tokio::time::sleep(CLOSE_CHECK) => {
                    if connection.peer().is_transport_closed() {
                        false
                    } else if listed_at.elapsed() >= RELIST {
                        true
                    } else {
                        continue;
                    }
                }
            },
        };
        listed_at = tokio::time::Instant::now();
        if !news || !list_into(server, &connection, announces, nudge).await {
            tracing::info!(server = %name, "lost the MCP server's connection that follows its tools; reconnecting");
            connection.close().await;
            return Ended::Lost { listed: true };
        }
    }
}

/// Lists the tools on `connection` into `server`, telling the engine when
/// they changed. Returns false when they could not be listed.
async fn list_into(
    server: &Server,
    connection: &Connection,
    announces: bool,
    nudge: &Nudge,
) -> bool {
    match list_on(&server.upstream, connection).await {
        Ok(tools) => {
            if server.listed(tools, announces) {
                nudge.tools_changed();
            }
            true
        }
        Err(why) => {
            server.unreachable(why);
            false
        }
    }
}

/// Every tool the server lists on `connection` (following pages), within
/// its connect timeout.
pub(crate) async fn list_on(
    upstream: &Upstream,
    connection: &Connection,
) -> Result<Vec<Tool>, String> {
    let listed = tokio::time::timeout(
        upstream.settings.connect_timeout,
        connection.peer().list_all_tools(),
    )
    .await;
    upstream
        .metrics
        .record("tools/list", upstream::outcome_of(&listed));
    match listed {
        Ok(Ok(tools)) => Ok(tools),
        Ok(Err(e)) => Err(format!(
            "MCP server \"{}\" did not list its tools: {}",
            upstream.settings.name,
            e.to_string().lines().next().unwrap_or("an error")
        )),
        Err(_) => Err(format!(
            "MCP server \"{}\" did not list its tools within {}s",
            upstream.settings.name,
            upstream.settings.connect_timeout.as_secs()
        )),
    }
}
