//! The SEP-2322 multi round-trip tools: input requests the client must
//! answer by calling again, and the sealed `requestState` that carries a
//! call's progress between rounds.

// Sampling and roots are deprecated (SEP-2577) but are what the scenarios use.
#![allow(deprecated)]

use super::*;

impl Everything {
    /// `test_input_required_result_request_state` and `…_tampered_state`:
    /// round 1 asks for a confirmation and seals the step; the retry must echo
    /// a state that opens, or the call fails with `-32602`.
    pub(super) fn mrtr_request_state(
        &self,
        cx: &RequestContext<RoleServer>,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        require_inputs(cx, &[InputKind::Elicitation])?;
        let opened = state
            .map(|sealed| self.open_state(tool, sealed))
            .transpose()?;
        if opened.is_some()
            && let Some(answer) = elicit_answer(responses, "confirm")
        {
            let confirmed = answer.bool_field("ok").unwrap_or(false);
            return Ok(text_result(format!(
                "Confirmed: state-ok (ok = {confirmed})"
            )));
        }
        let sealed = self.seal_state(
            tool,
            &SealedState {
                step: 1,
                name: None,
            },
        )?;
        Ok(input_required(
            [("confirm", elicitation_bool("Please confirm", "ok")?)],
            Some(sealed),
        ))
    }

    /// `test_input_required_result_multiple_inputs`: one round asking for all
    /// three input kinds; only the still-missing ones are asked again.
    pub(super) fn mrtr_multiple_inputs(
        &self,
        cx: &RequestContext<RoleServer>,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        require_inputs(
            cx,
            &[
                InputKind::Elicitation,
                InputKind::Sampling,
                InputKind::Roots,
            ],
        )?;
        let opened = state
            .map(|sealed| self.open_state(tool, sealed))
            .transpose()?;
        let name = elicit_answer(responses, "user_name");
        let greeting = sampling_answer(responses, "greeting");
        let roots = roots_answer(responses, "client_roots");
        if opened.is_some()
            && let (Some(name), Some(greeting), Some(roots)) = (&name, &greeting, &roots)
        {
            return Ok(text_result(format!(
                "All inputs received: name = {}, greeting = {}, roots = [{}]",
                name.string_field("name").unwrap_or("(none)"),
                greeting,
                roots.join(", ")
            )));
        }
        let mut requests = Vec::new();
        if opened.is_none() || name.is_none() {
            requests.push(("user_name", elicitation("What is your name?", "name")?));
        }
        if opened.is_none() || greeting.is_none() {
            requests.push(("greeting", sampling("Generate a greeting", 50)));
        }
        if opened.is_none() || roots.is_none() {
            requests.push(("client_roots", list_roots()));
        }
        let sealed = self.seal_state(
            tool,
            &SealedState {
                step: 1,
                name: None,
            },
        )?;
        Ok(input_required(requests, Some(sealed)))
    }

    /// `test_input_required_result_multi_round`: step 1 asks for a name,
    /// step 2 (with the name sealed into the new state) for a colour.
    pub(super) fn mrtr_multi_round(
        &self,
        cx: &RequestContext<RoleServer>,
        tool: &str,
        responses: Option<&InputResponses>,
        state: Option<&str>,
    ) -> Result<CallToolResponse, ErrorData> {
        require_inputs(cx, &[InputKind::Elicitation])?;
        let opened = state
            .map(|sealed| self.open_state(tool, sealed))
            .transpose()?;
        let step1 = || -> Result<CallToolResponse, ErrorData> {
            let sealed = self.seal_state(
                tool,
                &SealedState {
                    step: 1,
                    name: None,
                },
            )?;
            Ok(input_required(
                [("step1", elicitation("Step 1: What is your name?", "name")?)],
                Some(sealed),
            ))
        };
        let step2 = |name: String| -> Result<CallToolResponse, ErrorData> {
            let sealed = self.seal_state(
                tool,
                &SealedState {
                    step: 2,
                    name: Some(name),
                },
            )?;
            Ok(input_required(
                [(
                    "step2",
                    elicitation("Step 2: What is your favorite color?", "color")?,
                )],
                Some(sealed),
            ))
        };
        match opened {
            None => step1(),
            Some(SealedState { step: 1, .. }) => match elicit_answer(responses, "step1") {
                Some(answer) => step2(answer.string_field("name").unwrap_or("friend").to_owned()),
                None => step1(),
            },
            Some(SealedState { step: 2, name }) => match elicit_answer(responses, "step2") {
                Some(answer) => Ok(text_result(format!(
                    "Multi-round flow complete: {} likes {}",
                    name.as_deref().unwrap_or("friend"),
                    answer
                        .string_field("color")
                        .unwrap_or("no colour in particular")
                ))),
                None => step2(name.unwrap_or_else(|| "friend".to_owned())),
            },
            Some(SealedState { step, .. }) => Err(ErrorData::invalid_params(
                format!("requestState names an unknown step {step} (field `requestState`)"),
                None,
            )),
        }
    }

    /// Binds a sealed state to the tool that minted it.
    pub(super) fn seal_state(&self, tool: &str, state: &SealedState) -> Result<String, ErrorData> {
        let binding = state_binding(tool);
        self.state_codec
            .seal_json_with(
                state,
                &SealOptions::new()
                    .associated_data(binding.as_bytes())
                    .ttl(REQUEST_STATE_TTL),
            )
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    /// Opens an echoed state; every failure (forged, tampered, expired,
    /// minted for another tool) is the same `-32602`.
    pub(super) fn open_state(&self, tool: &str, sealed: &str) -> Result<SealedState, ErrorData> {
        let binding = state_binding(tool);
        self.state_codec
            .open_json_with(sealed, binding.as_bytes())
            .map_err(|error| {
                tracing::debug!(%error, tool, "rejected requestState");
                ErrorData::invalid_params(
                    "requestState failed integrity verification (field `requestState`)",
                    None,
                )
            })
    }
}

pub(super) fn mrtr_elicitation(
    cx: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    require_inputs(cx, &[InputKind::Elicitation])?;
    match elicit_answer(responses, "user_name") {
        Some(answer) if answer.accepted() => Ok(text_result(format!(
            "Hello, {}!",
            answer.string_field("name").unwrap_or("friend")
        ))),
        Some(_) => Ok(text_result("The user declined to give a name")),
        None => Ok(input_required(
            [("user_name", elicitation("What is your name?", "name")?)],
            None,
        )),
    }
}

pub(super) fn mrtr_sampling(
    cx: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    require_inputs(cx, &[InputKind::Sampling])?;
    match sampling_answer(responses, "capital_question") {
        Some(text) => Ok(text_result(format!("Sampling response: {text}"))),
        None => Ok(input_required(
            [(
                "capital_question",
                sampling("What is the capital of France?", 100),
            )],
            None,
        )),
    }
}

pub(super) fn mrtr_list_roots(
    cx: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    require_inputs(cx, &[InputKind::Roots])?;
    match roots_answer(responses, "client_roots") {
        Some(roots) => Ok(text_result(format!("Client roots: [{}]", roots.join(", ")))),
        None => Ok(input_required([("client_roots", list_roots())], None)),
    }
}

/// Asks only for the input kinds the request's capabilities declare.
pub(super) fn mrtr_capabilities(
    cx: &RequestContext<RoleServer>,
    responses: Option<&InputResponses>,
) -> Result<CallToolResponse, ErrorData> {
    let declared = declared_inputs(cx);
    let mut requests = Vec::new();
    let mut received = Vec::new();
    for kind in declared {
        match kind {
            InputKind::Elicitation => match elicit_answer(responses, "user_name") {
                Some(_) => received.push("elicitation"),
                None => requests.push(("user_name", elicitation("What is your name?", "name")?)),
            },
            InputKind::Sampling => match sampling_answer(responses, "greeting") {
                Some(_) => received.push("sampling"),
                None => requests.push(("greeting", sampling("Generate a greeting", 50))),
            },
            InputKind::Roots => match roots_answer(responses, "client_roots") {
                Some(_) => received.push("roots"),
                None => requests.push(("client_roots", list_roots())),
            },
        }
    }
    if !requests.is_empty() {
        return Ok(input_required(requests, None));
    }
    if received.is_empty() {
        Ok(text_result(
            "The client declared no capability an input request could use",
        ))
    } else {
        Ok(text_result(format!(
            "Capability-aware flow complete: {}",
            received.join(", ")
        )))
    }
}

// ─── MRTR helpers ───────────────────────────────────────────────────────────

pub(super) fn declared_inputs(cx: &RequestContext<RoleServer>) -> Vec<InputKind> {
    let capabilities = cx.client_capabilities().unwrap_or_default();
    let mut kinds = Vec::new();
    if capabilities.elicitation.is_some() {
        kinds.push(InputKind::Elicitation);
    }
    if capabilities.sampling.is_some() {
        kinds.push(InputKind::Sampling);
    }
    if capabilities.roots.is_some() {
        kinds.push(InputKind::Roots);
    }
    kinds
}

/// Fails with `-32021` naming every kind in `needed` the client did not
/// declare in this request's `clientCapabilities`.
pub(super) fn require_inputs(
    cx: &RequestContext<RoleServer>,
    needed: &[InputKind],
) -> Result<(), ErrorData> {
    let declared = declared_inputs(cx);
    let mut missing = ClientCapabilities::default();
    let mut any_missing = false;
    for kind in needed.iter().filter(|kind| !declared.contains(kind)) {
        any_missing = true;
        match kind {
            InputKind::Elicitation => missing.elicitation = Some(ElicitationCapability::default()),
            InputKind::Sampling => missing.sampling = Some(SamplingCapability::default()),
            InputKind::Roots => missing.roots = Some(RootsCapabilities::default()),
        }
    }
    if any_missing {
        Err(ErrorData::missing_required_client_capability(missing))
    } else {
        Ok(())
    }
}

/// An `InputRequiredResult` as the response of any of the three methods
/// allowed to return one.
pub(super) fn input_required<'a, T: From<InputRequiredResult>>(
    requests: impl IntoIterator<Item = (&'a str, InputRequest)>,
    state: Option<String>,
) -> T {
    let requests: InputRequests = requests
        .into_iter()
        .map(|(key, request)| (key.to_owned(), request))
        .collect();
    InputRequiredResult::new(Some(requests), state).into()
}

/// A one-field form elicitation asking for the string `field`.
pub(super) fn elicitation(message: &str, field: &str) -> Result<InputRequest, ErrorData> {
    let schema = ElicitationSchema::builder()
        .required_string_property(field, |property| property)
        .build()
        .map_err(|error| ErrorData::internal_error(error, None))?;
    Ok(form(message, schema))
}

/// A one-field form elicitation asking for the boolean `field`.
pub(super) fn elicitation_bool(message: &str, field: &str) -> Result<InputRequest, ErrorData> {
    let schema = ElicitationSchema::builder()
        .required_bool_property(field, |property| property)
        .build()
        .map_err(|error| ErrorData::internal_error(error, None))?;
    Ok(form(message, schema))
}

pub(super) fn form(message: &str, requested_schema: ElicitationSchema) -> InputRequest {
    InputRequest::Elicitation(ElicitRequest::new(
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message.to_owned(),
            requested_schema,
        },
    ))
}

pub(super) fn sampling(prompt: &str, max_tokens: u32) -> InputRequest {
    InputRequest::CreateMessage(CreateMessageRequest::new(CreateMessageRequestParams::new(
        vec![SamplingMessage::user_text(prompt)],
        max_tokens,
    )))
}

pub(super) fn list_roots() -> InputRequest {
    InputRequest::ListRoots(ListRootsRequest::default())
}

/// A usable elicitation answer: the value under `key` parses as an
/// `ElicitResult`. Anything else (absent, a number, a malformed object)
/// counts as missing, so the input is asked for again.
pub(super) fn elicit_answer(responses: Option<&InputResponses>, key: &str) -> Option<ElicitAnswer> {
    let value = responses?.get(key)?;
    serde_json::from_value::<ElicitResult>(value.clone())
        .ok()
        .map(ElicitAnswer)
}

pub(super) struct ElicitAnswer(ElicitResult);

impl ElicitAnswer {
    pub(super) fn accepted(&self) -> bool {
        matches!(self.0.action, ElicitationAction::Accept)
    }

    pub(super) fn field(&self, name: &str) -> Option<&Value> {
        if !self.accepted() {
            return None;
        }
        self.0.content.as_ref()?.get(name)
    }

    pub(super) fn string_field(&self, name: &str) -> Option<&str> {
        self.field(name)?.as_str()
    }

    pub(super) fn bool_field(&self, name: &str) -> Option<bool> {
        self.field(name)?.as_bool()
    }
}

/// The text of a usable sampling answer (a `CreateMessageResult`).
pub(super) fn sampling_answer(responses: Option<&InputResponses>, key: &str) -> Option<String> {
    let value = responses?.get(key)?;
    let result = serde_json::from_value::<CreateMessageResult>(value.clone()).ok()?;
    let text = result
        .message
        .content
        .into_vec()
        .into_iter()
        .filter_map(|block| match block {
            SamplingMessageContentBlock::Text(text) => Some(text.text),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ");
    Some(text)
}

/// The root URIs of a usable roots answer (a `ListRootsResult`).
pub(super) fn roots_answer(responses: Option<&InputResponses>, key: &str) -> Option<Vec<String>> {
    let value = responses?.get(key)?;
    let result = serde_json::from_value::<ListRootsResult>(value.clone()).ok()?;
    Some(result.roots.into_iter().map(|root| root.uri).collect())
}

pub(super) fn state_binding(tool: &str) -> String {
    format!("tools/call\n{tool}")
}
