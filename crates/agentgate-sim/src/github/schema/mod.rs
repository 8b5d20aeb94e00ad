//! The GraphQL schema subset, with GitHub's type, field and enum names (async-graphql).
//!
//! Queries resolve over a snapshot of one repository taken when `repository` resolves,
//! so each alias sees a consistent view. Errors carry GitHub's `type` in
//! `extensions.type`; the `graphql` module moves it to the top level.

mod actors;
mod connections;
mod enums;
mod items;
mod mutations;
mod query;
mod timeline;

use std::collections::BTreeMap;
use std::sync::Arc;

use async_graphql::{
    Context, EmptySubscription, Enum, Error, ErrorExtensions, ID, InputObject, InputValueError,
    InputValueResult, Interface, Object, Scalar, ScalarType, Schema, SimpleObject, Union,
    Value as GqlValue,
};
use chrono::Utc;

use super::agent::{self, AgentInput, Failure, UpdateIssue};
use super::ids::{cursor, iso, parse_cursor, parse_iso};
use super::state::{Actor as ActorData, Event, EventKind, Item, ItemState, Repo, repo_key};
use super::{COPILOT_LOGIN, GithubSim};

// Each section sees the others' types, as when they were one file.
use actors::*;
use connections::*;
use enums::*;
use items::*;
use mutations::*;
use query::*;
use timeline::*;

/// The executable schema.
pub(crate) type GithubSchema = Schema<QueryRoot, MutationRoot, EmptySubscription>;

/// Builds the schema.
pub(crate) fn build() -> GithubSchema {
    Schema::build(QueryRoot, MutationRoot, EmptySubscription).finish()
}

/// The `GraphQL-Features` header's flags, as request data.
#[derive(Clone, Debug, Default)]
pub(crate) struct Features(pub Vec<String>);

/// GitHub's GraphQL state name.
pub(crate) fn state_name(state: ItemState) -> &'static str {
    match state {
        ItemState::Open => "OPEN",
        ItemState::Closed => "CLOSED",
        ItemState::Merged => "MERGED",
    }
}

/// An error with GitHub's `type`.
pub(super) fn typed(kind: &'static str, message: impl Into<String>) -> Error {
    Error::new(message.into()).extend_with(|_, e| e.set("type", kind))
}

impl From<Failure> for Error {
    fn from(f: Failure) -> Self {
        match f {
            Failure::NotFound(m) => typed("NOT_FOUND", m),
            Failure::Forbidden(m) => typed("FORBIDDEN", m),
            Failure::Invalid(m) => Error::new(m),
        }
    }
}

pub(super) fn sim<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a GithubSim> {
    ctx.data::<GithubSim>()
}

/// `DateTime`: ISO-8601 UTC, second precision.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DateTime(pub chrono::DateTime<Utc>);

#[Scalar(name = "DateTime")]
impl ScalarType for DateTime {
    fn parse(value: GqlValue) -> InputValueResult<Self> {
        match &value {
            GqlValue::String(s) => parse_iso(s)
                .map(DateTime)
                .ok_or_else(|| InputValueError::custom(format!("\"{s}\" is not an ISO-8601 time"))),
            _ => Err(InputValueError::expected_type(value)),
        }
    }

    fn to_value(&self) -> GqlValue {
        GqlValue::String(iso(self.0))
    }
}

/// `URI`: GitHub's scalar for every `url` and `avatarUrl`.
#[derive(Clone, Debug)]
pub(crate) struct Uri(pub String);

#[Scalar(name = "URI")]
impl ScalarType for Uri {
    fn parse(value: GqlValue) -> InputValueResult<Self> {
        match value {
            GqlValue::String(s) => Ok(Uri(s)),
            other => Err(InputValueError::expected_type(other)),
        }
    }

    fn to_value(&self) -> GqlValue {
        GqlValue::String(self.0.clone())
    }
}
