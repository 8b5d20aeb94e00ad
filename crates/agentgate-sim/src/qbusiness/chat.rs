//! ChatSync, top to bottom: count → injected fault → application → parse and validate →
//! idempotent replay → plan the turn (may still fail, changes nothing) → apply it.
//!
//! Idempotency, when `client_token_replay` is on (the default): the first successful
//! response of a `clientToken` (per user) is stored. A repeat with the same token and the
//! same request gets that response again, with no new messages and no second side effect
//! (ticket, sign-in). The same token with a different request is a `ConflictException`.
//! Failed requests store nothing, so they can be retried with the same token. AWS marks
//! the token `idempotencyToken` but documents none of this; with the switch off, every
//! request is a new turn (a repeated action creates a second ticket), which is what the
//! side-effect tests run against.

use chrono::Utc;
use serde_json::Value;

use super::answer::{self, Answer};
use super::errors::{ApiError, RESOURCE_CONVERSATION, RESOURCE_PLUGIN};
use super::ids::{new_token, new_uuid};
use super::plugins::{
    self, CALENDAR_ANSWER, FIRST_TICKET, PendingSignIn, SIGNIN_MESSAGE, SIGNIN_PLUGIN_ID,
    TICKET_PLUGIN_ID, TICKET_REVIEW_MESSAGE, Ticket, TicketFields,
};
use super::request::{ChatSyncInput, Query, parse_chat_sync, validate_chat_sync};
use super::state::{Conversation, Replay, State};
use super::wire::{ActionReview, AuthChallengeRequest, ChatSyncOutput, Message};
use super::{Inner, SeenIdentity};

/// What a turn does besides answering.
#[derive(Debug)]
enum Effect {
    None,
    CreateTicket(TicketFields),
    /// Issue a new sign-in challenge.
    Challenge,
    /// The user signed in with this state.
    CompleteSignIn(String),
}

/// A turn that has been checked and can be applied.
#[derive(Debug)]
struct Plan {
    conversation_id: String,
    existing: bool,
    answer: Answer,
    action_review: Option<ActionReview>,
    effect: Effect,
}

/// Handles one ChatSync request; `base_url` is where `/oauth/authorize` is served.
pub(crate) fn chat_sync(
    sim: &Inner,
    application_id: &str,
    query: &Query,
    body: &[u8],
    base_url: &str,
) -> Result<Value, ApiError> {
    let token_hint = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        v.get("clientToken")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    {
        let mut st = sim.state();
        st.stats.chat_sync_requests += 1;
        st.stats.identities.push(SeenIdentity {
            user_id: query.user_id.clone(),
            user_groups: query.user_groups.clone(),
            session_user: query.session_user.clone(),
        });
        if let Some(token) = token_hint {
            *st.stats.by_client_token.entry(token).or_default() += 1;
        }
    }
    if let Some(err) = sim
        .faults
        .chat_sync_fault(application_id, &sim.config.region)
    {
        sim.state().stats.faults_injected += 1;
        return Err(err);
    }
    sim.check_application(application_id)?;

    let (raw, input) = parse_chat_sync(body)?;
    let mut errors = Vec::new();
    query.validate_user(&mut errors);
    validate_chat_sync(&input, &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::field_validation(errors));
    }

    let owner = query.owner();
    let fingerprint = fingerprint(raw, query);
    let mut st = sim.state();
    let replay_on = sim.config.client_token_replay;
    if let Some(token) = input.client_token.as_ref().filter(|_| replay_on)
        && let Some(replay) = st.replays.get(&(owner.clone(), token.clone()))
    {
        if replay.fingerprint == fingerprint {
            return Ok(replay.response.clone());
        }
        return Err(ApiError::conflict(
            "The clientToken was already used for a different request.",
            "CLIENT_TOKEN",
            token,
        ));
    }

    let plan = plan(sim, &st, &owner, &input)?;
    let response = apply(&mut st, &owner, &input, plan, base_url);
    if let Some(token) = input.client_token.as_ref().filter(|_| replay_on) {
        st.replays.insert(
            (owner, token.clone()),
            Replay {
                fingerprint,
                response: response.clone(),
            },
        );
    }
    st.stats.chat_sync_effects += 1;
    if let Some(token) = &input.client_token {
        *st.stats
            .effects_by_client_token
            .entry(token.clone())
            .or_default() += 1;
    }
    Ok(response)
}

fn fingerprint(mut raw: Value, query: &Query) -> Value {
    if let Some(object) = raw.as_object_mut() {
        object.remove("clientToken");
    }
    serde_json::json!({ "body": raw, "userGroups": query.user_groups })
}

fn plan(sim: &Inner, st: &State, owner: &str, input: &ChatSyncInput) -> Result<Plan, ApiError> {
    let existing = match &input.conversation_id {
        Some(id) => {
            let conversation = st
                .conversation(owner, id)
                .ok_or_else(|| ApiError::not_found(RESOURCE_CONVERSATION, id))?;
            if input.parent_message_id.as_deref()
                != Some(conversation.last_system_message_id.as_str())
            {
                return Err(ApiError::field(
                    "parentMessageId",
                    "Member must be the id of the latest system message of the conversation",
                ));
            }
            Some(conversation)
        }
        None => None,
    };
    let conversation_id = existing.map_or_else(new_uuid, |c| c.id.clone());
    let context = existing.and_then(Conversation::last_user_text);
    let message = input.message().unwrap_or_default();
    let text = |t: &str| Answer {
        text: t.to_owned(),
        attributions: Vec::new(),
    };
    let mut plan = Plan {
        conversation_id,
        existing: existing.is_some(),
        answer: text(""),
        action_review: None,
        effect: Effect::None,
    };

    if let Some(response) = &input.auth_challenge_response {
        let field = "authChallengeResponse.responseMap.state";
        let state = response
            .response_map
            .as_ref()
            .and_then(|m| m.get("state"))
            .ok_or_else(|| ApiError::field(field, "Member must not be null"))?;
        let pending = st
            .sign_ins
            .get(state)
            .filter(|p| p.user == owner)
            .ok_or_else(|| {
                ApiError::field(field, "Member must be the state of a sign-in request")
            })?;
        if pending.conversation_id != plan.conversation_id || !plan.existing {
            return Err(ApiError::field(
                field,
                "Member must be the state of a sign-in request of this conversation",
            ));
        }
        if pending.visited {
            plan.answer = text(CALENDAR_ANSWER);
            plan.effect = Effect::CompleteSignIn(state.clone());
        } else {
            plan.answer = text(SIGNIN_MESSAGE);
            plan.effect = Effect::Challenge;
        }
        return Ok(plan);
    }

    if let Some(action) = &input.action_execution {
        let plugin = action.plugin_id.as_deref().unwrap_or_default();
        match plugin {
            TICKET_PLUGIN_ID => {
                let fields = plugins::ticket_fields(action).map_err(ApiError::field_validation)?;
                plan.effect = Effect::CreateTicket(fields);
            }
            SIGNIN_PLUGIN_ID => {
                return Err(ApiError::field(
                    "actionExecution.pluginId",
                    "Member must be a plugin with actions to execute",
                ));
            }
            other => return Err(ApiError::not_found(RESOURCE_PLUGIN, other)),
        }
        return Ok(plan);
    }

    match input.mode() {
        "PLUGIN_MODE" => match input.plugin_id().unwrap_or_default() {
            TICKET_PLUGIN_ID => {
                plan.answer = text(TICKET_REVIEW_MESSAGE);
                plan.action_review = Some(plugins::ticket_review(message));
            }
            SIGNIN_PLUGIN_ID if st.signed_in.contains(owner) => {
                plan.answer = text(CALENDAR_ANSWER);
            }
            SIGNIN_PLUGIN_ID => {
                plan.answer = text(SIGNIN_MESSAGE);
                plan.effect = Effect::Challenge;
            }
            other => return Err(ApiError::not_found(RESOURCE_PLUGIN, other)),
        },
        "CREATOR_MODE" => plan.answer = text(&answer::create(message, context)),
        _ => {
            plan.answer = answer::retrieve(
                &sim.corpus,
                message,
                context,
                input.attribute_filter.as_ref(),
            );
        }
    }
    Ok(plan)
}

fn apply(
    st: &mut State,
    owner: &str,
    input: &ChatSyncInput,
    mut plan: Plan,
    base_url: &str,
) -> Value {
    let now = Utc::now().timestamp();
    let mut auth_challenge_request = None;
    match std::mem::replace(&mut plan.effect, Effect::None) {
        Effect::None => {}
        Effect::CreateTicket(fields) => {
            let number = FIRST_TICKET + st.tickets.len() as u64;
            let ticket = Ticket {
                id: format!("NWR-{number}"),
                summary: fields.summary,
                priority: fields.priority,
                description: fields.description,
                notify_me: fields.notify_me,
                user: owner.to_owned(),
                conversation_id: plan.conversation_id.clone(),
                client_token: input.client_token.clone(),
                created_at: now,
            };
            plan.answer.text = answer::truncate(
                &plugins::ticket_created_message(&ticket),
                answer::MAX_SYSTEM_MESSAGE,
            );
            st.tickets.push(ticket);
            st.stats.tickets_created += 1;
        }
        Effect::Challenge => {
            let state = new_token();
            st.sign_ins.insert(
                state.clone(),
                PendingSignIn {
                    user: owner.to_owned(),
                    conversation_id: plan.conversation_id.clone(),
                    visited: false,
                },
            );
            auth_challenge_request = Some(AuthChallengeRequest {
                authorization_url: format!("{base_url}/oauth/authorize?state={state}"),
            });
        }
        Effect::CompleteSignIn(state) => {
            st.sign_ins.remove(&state);
            st.signed_in.insert(owner.to_owned());
        }
    }

    let user_message_id = new_uuid();
    let system_message_id = new_uuid();
    let user_message = Message {
        message_id: user_message_id.clone(),
        body: input.message().map(str::to_owned),
        time: now,
        message_type: "USER",
        source_attribution: Vec::new(),
        action_review: None,
        action_execution: input.action_execution.clone(),
    };
    let system_message = Message {
        message_id: system_message_id.clone(),
        body: Some(plan.answer.text.clone()),
        time: now,
        message_type: "SYSTEM",
        source_attribution: plan.answer.attributions.clone(),
        action_review: plan.action_review.clone(),
        action_execution: None,
    };
    let conversation = if plan.existing {
        st.conversation_mut(owner, &plan.conversation_id)
    } else {
        let list = st.conversations.entry(owner.to_owned()).or_default();
        list.push(Conversation {
            id: plan.conversation_id.clone(),
            title: answer::truncate(input.message().unwrap_or("New conversation"), 80),
            start_time: now,
            messages: Vec::new(),
            last_system_message_id: String::new(),
        });
        list.last_mut()
    };
    if let Some(conversation) = conversation {
        conversation.messages.push(user_message);
        conversation.messages.push(system_message);
        conversation.last_system_message_id = system_message_id.clone();
    }

    let output = ChatSyncOutput {
        conversation_id: plan.conversation_id,
        system_message: plan.answer.text,
        system_message_id,
        user_message_id,
        source_attributions: plan.answer.attributions,
        action_review: plan.action_review,
        auth_challenge_request,
        failed_attachments: Vec::new(),
    };
    serde_json::to_value(output).unwrap_or(Value::Null)
}
