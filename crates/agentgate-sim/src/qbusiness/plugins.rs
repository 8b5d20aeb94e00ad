//! The two plugins of the emulated application.
//!
//! - **IT help desk: open a ticket** ([`TICKET_PLUGIN_ID`], type `CUSTOM`): the first
//!   PLUGIN_MODE turn answers with an `actionReview` whose payload has `summary`
//!   (prefilled from the question), `priority` (LOW/MEDIUM/HIGH, prefilled MEDIUM),
//!   `description` and `notify_me`. A turn with `actionExecution` for this plugin checks
//!   the payload and creates ticket `NWR-<n>` (from 1001 on).
//! - **Calendar** ([`SIGNIN_PLUGIN_ID`]): needs the user to sign in. Until the user has,
//!   a PLUGIN_MODE turn answers with `authChallengeRequest.authorizationUrl =
//!   {base}/oauth/authorize?state=<32 hex chars>`. Opening that URL signs the user in,
//!   as the plugin's OAuth redirect to the application's web experience would (AWS's
//!   samples register `<web experience URL>/oauth/callback`): the next calendar question
//!   is answered, and the user stays signed in for later ones. AWS documents no
//!   `authChallengeResponse.responseMap` keys; the emulator also accepts
//!   `{"state": "<state>"}` there (a guess, used by no client of ours): a state not
//!   opened yet gets a fresh challenge, an unknown one a `ValidationException` naming
//!   `authChallengeResponse.responseMap.state`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use super::errors::FieldError;
use super::request::ActionExecution;
use super::wire::{ActionReview, ActionReviewPayloadField, AllowedValue};

/// Plugin id of "IT help desk: open a ticket".
pub const TICKET_PLUGIN_ID: &str = "7f1c2d3e-4b5a-4c6d-8e9f-0a1b2c3d4e5f";
/// Plugin id of "Calendar", which needs the user to sign in.
pub const SIGNIN_PLUGIN_ID: &str = "3c9a8b7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d";
/// The first ticket number.
pub(super) const FIRST_TICKET: u64 = 1001;
/// Ticket priorities, in order.
pub(super) const PRIORITIES: &[&str] = &["LOW", "MEDIUM", "HIGH"];

/// The system message of the ticket review.
pub(super) const TICKET_REVIEW_MESSAGE: &str =
    "I can open an IT help desk ticket for you. Please review the details.";
/// The system message that goes with a sign-in challenge.
pub(super) const SIGNIN_MESSAGE: &str =
    "The Calendar plugin needs you to sign in first. Open the sign-in link, then continue.";
/// The calendar answer after sign-in.
pub(super) const CALENDAR_ANSWER: &str = "Your next meeting is \"Robot fleet weekly sync\" tomorrow \
     at 10:00 in Oslo HQ, room Fjord, with Ingrid Berg and Tomas Lund. After that you have \
     \"Laptop refresh planning\" at 14:30 in Berlin, room Spree.";

/// A ticket created by the ticket plugin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ticket {
    /// `NWR-<n>`.
    pub id: String,
    /// One-line summary.
    pub summary: String,
    /// `LOW`, `MEDIUM` or `HIGH`.
    pub priority: String,
    /// Longer description, if given.
    pub description: Option<String>,
    /// Whether the user wants notifications.
    pub notify_me: bool,
    /// Who opened it (`anonymous` without a user id).
    pub user: String,
    /// The conversation it was opened in.
    pub conversation_id: String,
    /// The ChatSync `clientToken` of the execution.
    pub client_token: Option<String>,
    /// Epoch seconds.
    pub created_at: i64,
}

/// The fields a ticket execution carries, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TicketFields {
    /// Summary.
    pub summary: String,
    /// Priority.
    pub priority: String,
    /// Description.
    pub description: Option<String>,
    /// Notify me.
    pub notify_me: bool,
}

fn field(
    name: &str,
    order: i32,
    description: &str,
    field_type: &str,
    value: Option<Value>,
    required: bool,
) -> ActionReviewPayloadField {
    ActionReviewPayloadField {
        display_name: name.into(),
        display_order: order,
        display_description: description.into(),
        field_type: field_type.into(),
        value,
        allowed_values: None,
        required,
    }
}

/// The review of a new ticket, `summary` prefilled from the user's message.
pub(super) fn ticket_review(message: &str) -> ActionReview {
    let summary = super::answer::truncate(message.trim(), 120);
    let mut priority = field(
        "Priority",
        2,
        "How urgent the problem is. HIGH is for problems that stop your work.",
        "STRING",
        Some(json!("MEDIUM")),
        true,
    );
    priority.allowed_values = Some(
        PRIORITIES
            .iter()
            .map(|p| {
                let mut display = p.to_lowercase();
                display[..1].make_ascii_uppercase();
                AllowedValue {
                    value: json!(p),
                    display_value: json!(display),
                }
            })
            .collect(),
    );
    let payload = BTreeMap::from([
        (
            "summary".to_owned(),
            field(
                "Summary",
                1,
                "A one-line summary of the problem.",
                "STRING",
                Some(json!(summary)),
                true,
            ),
        ),
        ("priority".to_owned(), priority),
        (
            "description".to_owned(),
            field(
                "Description",
                3,
                "What happened, and what you already tried.",
                "STRING",
                None,
                false,
            ),
        ),
        (
            "notify_me".to_owned(),
            field(
                "Notify me",
                4,
                "Send me an email when the ticket changes.",
                "BOOLEAN",
                Some(json!(true)),
                false,
            ),
        ),
    ]);
    ActionReview {
        plugin_id: TICKET_PLUGIN_ID.into(),
        plugin_type: "CUSTOM".into(),
        payload,
        payload_field_name_separator: ".".into(),
    }
}

/// Checks a ticket execution payload; errors name `actionExecution.payload.<field>`.
pub(super) fn ticket_fields(action: &ActionExecution) -> Result<TicketFields, Vec<FieldError>> {
    let empty = BTreeMap::new();
    let payload = action.payload.as_ref().unwrap_or(&empty);
    let path = |f: &str| format!("actionExecution.payload.{f}");
    let mut errors = Vec::new();
    for name in payload.keys() {
        if !["summary", "priority", "description", "notify_me"].contains(&name.as_str()) {
            errors.push(FieldError::new(
                path(name),
                "Member is not a field of this action",
            ));
        }
    }
    let text = |name: &str, errors: &mut Vec<FieldError>| match payload.get(name).map(|f| &f.value)
    {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_owned()),
        Some(_) => {
            errors.push(FieldError::new(path(name), "Member must be a string"));
            None
        }
    };
    let summary = text("summary", &mut errors).filter(|s| !s.is_empty());
    if summary.is_none() && !errors.iter().any(|e| e.name == path("summary")) {
        errors.push(FieldError::new(path("summary"), "Member is required"));
    }
    let priority = text("priority", &mut errors);
    match &priority {
        Some(p) if PRIORITIES.contains(&p.as_str()) => {}
        Some(_) => errors.push(FieldError::new(
            path("priority"),
            format!("Member must be one of [{}]", PRIORITIES.join(", ")),
        )),
        None if !errors.iter().any(|e| e.name == path("priority")) => {
            errors.push(FieldError::new(path("priority"), "Member is required"));
        }
        None => {}
    }
    let description = text("description", &mut errors).filter(|s| !s.is_empty());
    let notify_me = match payload.get("notify_me").map(|f| &f.value) {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            errors.push(FieldError::new(
                path("notify_me"),
                "Member must be a boolean",
            ));
            true
        }
    };
    match (summary, priority) {
        (Some(summary), Some(priority)) if errors.is_empty() => Ok(TicketFields {
            summary,
            priority,
            description,
            notify_me,
        }),
        _ => Err(errors),
    }
}

/// The system message after a ticket was created.
pub(super) fn ticket_created_message(ticket: &Ticket) -> String {
    format!(
        "Created ticket {}: {} (priority {}).",
        ticket.id, ticket.summary, ticket.priority
    )
}

/// A sign-in the Calendar plugin asked for.
#[derive(Clone, Debug)]
pub(super) struct PendingSignIn {
    /// Who must sign in.
    pub user: String,
    /// The conversation the challenge was sent in.
    pub conversation_id: String,
    /// Whether the authorization URL was opened.
    pub visited: bool,
}

/// The small page the authorization URL serves.
pub(super) fn signed_in_page() -> String {
    "<!doctype html><html><head><title>Northwind Calendar - signed in</title></head>\
     <body><h1>Signed in to Northwind Calendar</h1>\
     <p>You are signed in. Return to the chat and continue.</p></body></html>"
        .into()
}

/// The page for an unknown `state`.
pub(super) fn unknown_state_page() -> String {
    "<!doctype html><html><head><title>Northwind Calendar - sign-in failed</title></head>\
     <body><h1>Unknown or expired sign-in request</h1>\
     <p>Ask the assistant again to get a new sign-in link.</p></body></html>"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qbusiness::request::PayloadField;

    fn action(payload: Value) -> ActionExecution {
        let payload: BTreeMap<String, PayloadField> =
            serde_json::from_value(payload).expect("payload");
        ActionExecution {
            plugin_id: Some(TICKET_PLUGIN_ID.into()),
            payload: Some(payload),
            payload_field_name_separator: Some(".".into()),
        }
    }

    #[test]
    fn review_has_the_four_fields() {
        let review = ticket_review("My VPN drops every hour");
        assert_eq!(review.payload.len(), 4);
        assert_eq!(
            review.payload["summary"].value,
            Some(json!("My VPN drops every hour"))
        );
        assert_eq!(review.payload["priority"].value, Some(json!("MEDIUM")));
        let allowed = review.payload["priority"]
            .allowed_values
            .as_ref()
            .expect("allowed");
        assert_eq!(allowed[2].display_value, json!("High"));
        assert!(!review.payload["description"].required);
    }

    #[test]
    fn execution_payload_is_checked() {
        let ok = ticket_fields(&action(json!({
            "summary": {"value": "VPN drops"}, "priority": {"value": "HIGH"},
            "notify_me": {"value": false}
        })))
        .expect("valid");
        assert_eq!(ok.priority, "HIGH");
        assert!(!ok.notify_me);

        let errors = ticket_fields(&action(json!({
            "summary": {"value": "VPN drops"}, "priority": {"value": "URGENT"}
        })))
        .expect_err("bad priority");
        assert_eq!(errors[0].name, "actionExecution.payload.priority");

        let errors =
            ticket_fields(&action(json!({"priority": {"value": "LOW"}}))).expect_err("no summary");
        assert_eq!(errors[0].name, "actionExecution.payload.summary");
    }
}
