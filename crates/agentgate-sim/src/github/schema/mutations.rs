//! The mutation root: `updateIssue`, `addAssigneesToAssignable`, … with
//! GitHub's input types.

use super::*;

/// `AgentAssignmentInput`.
#[derive(Clone, Debug, InputObject)]
pub(crate) struct AgentAssignmentInput {
    pub(super) target_repository_id: Option<ID>,
    pub(super) base_ref: Option<String>,
    pub(super) custom_instructions: Option<String>,
    pub(super) custom_agent: Option<String>,
    pub(super) model: Option<String>,
}

/// `UpdateIssueInput`.
#[derive(Clone, Debug, InputObject)]
pub(crate) struct UpdateIssueInput {
    pub(super) id: ID,
    pub(super) title: Option<String>,
    pub(super) body: Option<String>,
    pub(super) state: Option<IssueState>,
    pub(super) assignee_ids: Option<Vec<ID>>,
    pub(super) label_ids: Option<Vec<ID>>,
    pub(super) milestone_id: Option<ID>,
    pub(super) project_ids: Option<Vec<ID>>,
    pub(super) client_mutation_id: Option<String>,
    pub(super) agent_assignment: Option<AgentAssignmentInput>,
}

/// `UpdateIssuePayload`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct UpdateIssuePayload {
    pub(super) issue: Option<Issue>,
    pub(super) client_mutation_id: Option<String>,
}

/// `RemoveAssigneesFromAssignableInput`.
#[derive(Clone, Debug, InputObject)]
pub(crate) struct RemoveAssigneesFromAssignableInput {
    pub(super) assignable_id: ID,
    pub(super) assignee_ids: Vec<ID>,
    pub(super) client_mutation_id: Option<String>,
}

/// `RemoveAssigneesFromAssignablePayload`.
#[derive(Clone, Debug, SimpleObject)]
pub(crate) struct RemoveAssigneesFromAssignablePayload {
    pub(super) assignable: Option<Assignable>,
    pub(super) client_mutation_id: Option<String>,
}

/// `Mutation`.
#[derive(Debug)]
pub(crate) struct MutationRoot;

pub(super) fn assignable(sim: &GithubSim, key: &str, number: u64) -> Option<Assignable> {
    let repo = snapshot(sim, key)?;
    repo.find_pull_request(number)
        .map(Assignable::PullRequest)
        .or_else(|| repo.find_issue(number).map(Assignable::Issue))
}

#[Object(name = "Mutation")]
impl MutationRoot {
    pub(super) async fn update_issue(
        &self,
        ctx: &Context<'_>,
        input: UpdateIssueInput,
    ) -> async_graphql::Result<Option<UpdateIssuePayload>> {
        let sim = sim(ctx)?;
        let features = ctx
            .data::<Features>()
            .map(|f| f.0.clone())
            .unwrap_or_default();
        let _ = (&input.label_ids, &input.milestone_id, &input.project_ids);
        let update = UpdateIssue {
            id: input.id.0,
            title: input.title,
            body: input.body,
            state: input.state.map(|s| match s {
                IssueState::Open => ItemState::Open,
                IssueState::Closed => ItemState::Closed,
            }),
            assignee_ids: input
                .assignee_ids
                .map(|ids| ids.into_iter().map(|i| i.0).collect()),
            agent: input.agent_assignment.map(|a| AgentInput {
                target_repository_id: a.target_repository_id.map(|i| i.0),
                base_ref: a.base_ref,
                custom_instructions: a.custom_instructions,
                custom_agent: a.custom_agent,
                model: a.model,
            }),
        };
        let (key, number) = agent::update_issue(sim, &features, update)?;
        Ok(Some(UpdateIssuePayload {
            issue: snapshot(sim, &key).and_then(|r| r.find_issue(number)),
            client_mutation_id: input.client_mutation_id,
        }))
    }

    pub(super) async fn remove_assignees_from_assignable(
        &self,
        ctx: &Context<'_>,
        input: RemoveAssigneesFromAssignableInput,
    ) -> async_graphql::Result<Option<RemoveAssigneesFromAssignablePayload>> {
        let sim = sim(ctx)?;
        let ids: Vec<String> = input.assignee_ids.into_iter().map(|i| i.0).collect();
        let (key, number) = agent::remove_assignees(sim, &input.assignable_id.0, &ids)?;
        Ok(Some(RemoveAssigneesFromAssignablePayload {
            assignable: assignable(sim, &key, number),
            client_mutation_id: input.client_mutation_id,
        }))
    }
}
