//! The emulator's mutable state: conversations per (application, user), idempotency
//! replays, pending sign-ins, created tickets and the counters behind
//! [`Stats`]. One mutex guards all of it; handlers hold it only for
//! in-memory work, never across an `.await`.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::Stats;
use super::plugins::{PendingSignIn, Ticket};
use super::wire::Message;

/// One conversation.
#[derive(Clone, Debug)]
pub(super) struct Conversation {
    /// 36-character id.
    pub id: String,
    /// The first user message, shortened.
    pub title: String,
    /// Epoch seconds.
    pub start_time: i64,
    /// USER and SYSTEM messages, oldest first.
    pub messages: Vec<Message>,
    /// The id a follow-up must send as `parentMessageId`.
    pub last_system_message_id: String,
}

impl Conversation {
    /// The most recent user message with text (the context of a follow-up).
    pub(super) fn last_user_text(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .filter(|m| m.message_type == "USER")
            .find_map(|m| m.body.as_deref())
    }
}

/// A stored first response of a clientToken.
#[derive(Clone, Debug)]
pub(super) struct Replay {
    /// The request (body without `clientToken`, plus the user groups).
    pub fingerprint: Value,
    /// The response body sent the first time.
    pub response: Value,
}

/// Everything that changes.
#[derive(Debug, Default)]
pub(super) struct State {
    /// Conversations by owner (user id or `anonymous`), in creation order.
    pub conversations: HashMap<String, Vec<Conversation>>,
    /// First responses by (owner, clientToken).
    pub replays: HashMap<(String, String), Replay>,
    /// Sign-ins by OAuth `state`.
    pub sign_ins: HashMap<String, PendingSignIn>,
    /// Owners signed in to the Calendar plugin.
    pub signed_in: HashSet<String>,
    /// Created tickets, oldest first.
    pub tickets: Vec<Ticket>,
    /// Counters.
    pub stats: Stats,
    /// Identity Center's identity contexts and STS's sessions.
    pub identity: super::identity_center::IdentityState,
}

impl State {
    /// The owner's conversation `id`.
    pub(super) fn conversation(&self, owner: &str, id: &str) -> Option<&Conversation> {
        self.conversations
            .get(owner)
            .and_then(|list| list.iter().find(|c| c.id == id))
    }

    /// The owner's conversation `id`, mutably.
    pub(super) fn conversation_mut(&mut self, owner: &str, id: &str) -> Option<&mut Conversation> {
        self.conversations
            .get_mut(owner)
            .and_then(|list| list.iter_mut().find(|c| c.id == id))
    }

    /// Removes the owner's conversation `id`; whether it existed.
    pub(super) fn remove_conversation(&mut self, owner: &str, id: &str) -> bool {
        let Some(list) = self.conversations.get_mut(owner) else {
            return false;
        };
        let before = list.len();
        list.retain(|c| c.id != id);
        before != list.len()
    }
}
